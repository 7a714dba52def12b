-- Record a node's final failure; every node downstream of it becomes BLOCKED.
-- Independent branches keep running, so their work is kept for a later replay.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] error JSON. Returns {'ok', final_status_or_empty}.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'stale'} end
release(node)
redis.call('HSET', K.error, node, ARGV[5])
set_final(node, 'failed')
emit('node.failed', node)
local stack = cjson.decode(redis.call('HGET', K.dependents, node))
while #stack > 0 do
  local child = table.remove(stack)
  if redis.call('HGET', K.state, child) == 'pending' then
    set_final(child, 'blocked')
    emit('node.blocked', child, 'by', node)
    for _, next_child in ipairs(cjson.decode(redis.call('HGET', K.dependents, child))) do
      stack[#stack + 1] = next_child
    end
  end
end
return {'ok', finalize_if_done()}
