-- On a Cluster, the namespace's half of a node's memory write, after check_node.lua found
-- the node this worker's: all in the namespace's slot. The namespace's writers hash keeps
-- the highest fence each writer (<run>/<node>) has shown here (by a write or a read,
-- read_namespace.lua) and its last applied call: a fence below it is a zombie's (its node
-- was taken over and the new owner has touched this namespace since), refused; the call
-- last applied is answered again, not applied again (a worker that died before copying
-- its record to the run).
-- KEYS[1] the namespace's files, KEYS[2] its meta, KEYS[3] its writers.
-- ARGV[1] writer, ARGV[2] fence, ARGV[3] the call's field, ARGV[4] the version the write
-- was computed from, ARGV[5] retention (s), ARGV[6] the call's record (JSON), ARGV[7] the
-- namespace's bytes after, then (path, 'set' | 'del', text) triples.
-- Returns {'outcome', 'lost'}, {'outcome', 'done', 'record', <json>}, {'outcome', 'moved'}
-- or {'outcome', 'applied'}.
local writer, fence = ARGV[1], tonumber(ARGV[2])
local shown = tonumber(redis.call('HGET', KEYS[3], 'fence:' .. writer) or '0')
if fence < shown then return {'outcome', 'lost'} end
redis.call('HSET', KEYS[3], 'fence:' .. writer, fence)
if redis.call('HGET', KEYS[3], 'call:' .. writer) == ARGV[3] then
  return {'outcome', 'done', 'record', redis.call('HGET', KEYS[3], 'record:' .. writer)}
end
local version = redis.call('HGET', KEYS[2], 'version') or '0'
if version ~= ARGV[4] then return {'outcome', 'moved'} end
for i = 8, #ARGV, 3 do
  if ARGV[i + 1] == 'set' then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
  else
    redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('HINCRBY', KEYS[2], 'version', 1)
redis.call('HSET', KEYS[2], 'bytes', ARGV[7], 'updated_ms', now)
redis.call('HSET', KEYS[3], 'call:' .. writer, ARGV[3], 'record:' .. writer, ARGV[6])
local ttl = tonumber(ARGV[5])
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[3]}) do redis.call('EXPIRE', key, ttl) end
return {'outcome', 'applied'}
