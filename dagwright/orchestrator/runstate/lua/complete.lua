-- Record a node's success and advance the run: O(out-degree of the node), never a scan.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] output JSON.
-- Returns {'ok', final_run_status_or_empty, {{node, fence, dispatch}...}} or {'stale'}.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'stale'} end
release(node)
redis.call('HDEL', K.deliveries, node)
redis.call('HSET', K.output, node, ARGV[5])
set_final(node, 'succeeded')
emit('node.succeeded', node)
local ready = {}
for _, child in ipairs(cjson.decode(redis.call('HGET', K.dependents, node))) do
  if redis.call('HINCRBY', K.remaining, child, -1) == 0
      and redis.call('HGET', K.state, child) == 'pending' then
    queue_node(child, ready)
  end
end
return {'ok', finalize_if_done(), ready}
