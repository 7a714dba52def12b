-- Reserve room for one LLM call in its model's rate limits, waiting in turn.
-- KEYS: calls (zset reservation -> ms after which it counts for one more window), tokens
-- (hash reservation -> tokens, and '=total'), waiters (zset ticket -> ms first asked),
-- alive (zset ticket -> ms its place lapses). ARGV: ticket, window ms, requests per
-- window (0: none), tokens per window (0: none), tokens estimate, hold ms, waiter ttl ms.
-- Returns {'status', 'ok'|'wait', 'ahead', tickets ahead, 'wait_ms', ms to wait before
-- asking again}.
local calls, tokens, waiters, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ticket, window = ARGV[1], tonumber(ARGV[2])
local max_calls, max_tokens, estimate = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', calls, '-inf', now - window)) do
  redis.call('HINCRBY', tokens, '=total', -tonumber(redis.call('HGET', tokens, id) or 0))
  redis.call('HDEL', tokens, id)
end
redis.call('ZREMRANGEBYSCORE', calls, '-inf', now - window)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', alive, '-inf', now)) do
  redis.call('ZREM', waiters, gone)
end
redis.call('ZREMRANGEBYSCORE', alive, '-inf', now)
redis.call('ZADD', waiters, 'NX', now, ticket)
redis.call('ZADD', alive, now + tonumber(ARGV[7]), ticket)
local ahead = redis.call('ZRANK', waiters, ticket)
if ahead > 0 then return {'status', 'wait', 'ahead', ahead, 'wait_ms', 50 * ahead} end
local total = tonumber(redis.call('HGET', tokens, '=total') or 0)
if (max_calls > 0 and redis.call('ZCARD', calls) + 1 > max_calls)
    or (max_tokens > 0 and total + estimate > max_tokens) then
  local oldest = redis.call('ZRANGE', calls, 0, 0, 'WITHSCORES')
  local wait = oldest[2] and (tonumber(oldest[2]) + window - now) or 1
  return {'status', 'wait', 'ahead', 0, 'wait_ms', math.max(wait, 1)}
end
redis.call('ZREM', waiters, ticket)
redis.call('ZREM', alive, ticket)
redis.call('ZADD', calls, now + tonumber(ARGV[6]), ticket)
redis.call('HSET', tokens, ticket, estimate)
redis.call('HINCRBY', tokens, '=total', estimate)
return {'status', 'ok', 'ahead', 0, 'wait_ms', 0}
