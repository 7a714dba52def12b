-- On a Cluster, the run's half of a node's memory write (apply.lua is both halves in one
-- step on one server; docs/internals/cluster.md): is the node still this worker's, and
-- was the call applied before? Nothing is written.
-- KEYS[1] the run's state hash, KEYS[2] its fence hash, KEYS[3] the run's memory writes.
-- ARGV[1] node, ARGV[2] fence, ARGV[3] the call's field (<node>/<tool_use_id>).
-- Returns {'outcome', 'lost'}, {'outcome', 'done', 'record', <json>} or {'outcome', 'ours'}.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'running' or redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return {'outcome', 'lost'}
end
local earlier = redis.call('HGET', KEYS[3], ARGV[3])
if earlier then return {'outcome', 'done', 'record', earlier} end
return {'outcome', 'ours'}
