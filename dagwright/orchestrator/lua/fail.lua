-- Record a node's final failure; every node downstream of it becomes BLOCKED.
-- Independent branches keep running, so their work is kept for a later replay.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] error JSON; to re-plan the failed subgraph, also
-- ARGV[6] the re-planners' id prefix, ARGV[7] a re-planner's spec with __replan_id__ for
-- its id, ARGV[8] its dispatch (else ''). The re-planner is added in the same step, so
-- the run cannot finish in between; the run's re-plan count is checked and taken here, so
-- two branches failing at once cannot both use the last re-plan (nor the same id).
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
  local run = redis.call('HMGET', K.run, 'replans', 'replan_max')
  if tonumber(run[1] or 0) < tonumber(run[2] or 0) then
    local id = ARGV[6] .. redis.call('HINCRBY', K.run, 'replans', 1)
    local spec = string.gsub(ARGV[7], '__replan_id__', id)
    add_internal_node(id, spec, ARGV[8])
    queue_node(id, ready)
  end
end
return {'ok', finalize_if_done(), ready}
