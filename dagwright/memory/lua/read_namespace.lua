-- On a Cluster, a node's read of its namespace (the snapshot a command is computed from):
-- the files and version at one instant, and the reader's fence raised in the namespace's
-- writers hash, so that once this node has seen the namespace no zombie of it (a lower
-- fence) can write there (write_namespace.lua). An older fence than the one shown is
-- told apart (stale 1): the reader is a zombie itself.
-- KEYS[1] the namespace's files, KEYS[2] its meta, KEYS[3] its writers.
-- ARGV[1] writer (<run>/<node>), ARGV[2] fence, ARGV[3] the namespace's retention (s).
-- Returns {'files', {path, text, ...}, 'version', v, 'stale', 0|1}.
local fence = tonumber(ARGV[2])
local field = 'fence:' .. ARGV[1]
local shown = tonumber(redis.call('HGET', KEYS[3], field) or '0')
if fence > shown then
  redis.call('HSET', KEYS[3], field, fence)
  redis.call('EXPIRE', KEYS[3], tonumber(ARGV[3]))
end
local files = redis.call('HGETALL', KEYS[1])
local version = redis.call('HGET', KEYS[2], 'version') or '0'
return {'files', files, 'version', version, 'stale', fence < shown and 1 or 0}
