-- An LLM call returned: it counts its real tokens (ARGV[2]) for one window from now.
-- KEYS: calls, tokens (as in ratelimit_reserve.lua); ARGV[1] the reservation.
-- Returns {'settled', 1}.
local calls, tokens, id, used = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local reserved = tonumber(redis.call('HGET', tokens, id) or 0)
redis.call('ZADD', calls, now, id)
redis.call('HSET', tokens, id, used)
redis.call('HINCRBY', tokens, '=total', used - reserved)
return {'settled', 1}
