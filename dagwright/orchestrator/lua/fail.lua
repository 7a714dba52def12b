-- Record a node's final failure; every node downstream of it becomes BLOCKED.
-- Independent branches keep running, so their work is kept for a later replay.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] error JSON; to re-plan the failed subgraph, also
-- ARGV[6] a re-planner node's id, ARGV[7] its spec, ARGV[8] its dispatch (else '').
-- The re-planner is added in the same step, so the run cannot finish in between.
-- Returns {'ok', final_status_or_empty, {{node, fence, dispatch}...}}.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'stale'} end
release(node)
redis.call('HSET', K.error, node, ARGV[5])
set_final(node, 'failed')
emit('node.failed', node)
block_downstream(node)
local ready = {}
if ARGV[6] ~= '' then
  add_internal_node(ARGV[6], ARGV[7], ARGV[8])
  redis.call('HINCRBY', K.run, 'replans', 1)
  queue_node(ARGV[6], ready)
end
return {'ok', finalize_if_done(), ready}
