-- A reconciler says it is alive and learns how many are (execution/buckets.py): KEYS[1]
-- the sorted set token -> epoch ms of its last pass (server time), ARGV[1] its token,
-- ARGV[2] the lease in ms (a reconciler silent for that long is gone: dropped), ARGV[3]
-- '1' to leave (a clean stop). Returns {'live', reconcilers alive now}.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 10)
return {'live', redis.call('ZCARD', KEYS[1])}
