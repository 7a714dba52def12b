-- Apply one memory write for a node this worker still runs, exactly once.
-- KEYS[1] the run's state hash, KEYS[2] its fence hash, KEYS[3] the run's memory writes,
-- KEYS[4] the namespace's files, KEYS[5] its meta, KEYS[6] the namespace index.
-- ARGV[1] node, ARGV[2] fence, ARGV[3] the call's field (<node>/<tool_use_id>),
-- ARGV[4] the version the write was computed from, ARGV[5] retention (s), ARGV[6] the
-- namespace, ARGV[7] the call's record (JSON), ARGV[8] the namespace's bytes after,
-- then (path, 'set' | 'del', text) triples.
-- Returns {'outcome', 'lost'} (the node is not ours: nothing written), {'outcome',
-- 'done', 'record', <json>} (the call was applied before: not again), {'outcome',
-- 'moved'} (another write came first: compute it again) or {'outcome', 'applied'}.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'running' or redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return {'outcome', 'lost'}
end
local earlier = redis.call('HGET', KEYS[3], ARGV[3])
if earlier then return {'outcome', 'done', 'record', earlier} end
local version = redis.call('HGET', KEYS[5], 'version') or '0'
if version ~= ARGV[4] then return {'outcome', 'moved'} end
for i = 9, #ARGV, 3 do
  if ARGV[i + 1] == 'set' then
    redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 2])
  else
    redis.call('HDEL', KEYS[4], ARGV[i])
  end
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('HINCRBY', KEYS[5], 'version', 1)
redis.call('HSET', KEYS[5], 'bytes', ARGV[8], 'updated_ms', now)
redis.call('HSET', KEYS[3], ARGV[3], ARGV[7])
local ttl = tonumber(ARGV[5])
for _, key in ipairs({KEYS[3], KEYS[4], KEYS[5]}) do redis.call('EXPIRE', key, ttl) end
redis.call('ZADD', KEYS[6], now, ARGV[6])
return {'outcome', 'applied'}
