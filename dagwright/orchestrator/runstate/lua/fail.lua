-- Record a node's final failure and its dead letter; its dependents are decided by their
-- run_if rules (settle_dependents): an all_succeeded or none_failed one, and every
-- all_succeeded node after it, becomes BLOCKED; an any_failed or all_done handler runs
-- once its dependencies have all ended (a one_success one at the first success). Independent branches keep running, so their work is kept for a replay.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] error JSON; to re-plan the failed subgraph, also
-- ARGV[6] the re-planners' id prefix, ARGV[7] a re-planner's spec with __replan_id__ for
-- its id, ARGV[8] its dispatch (else ''). The re-planner is added in the same step, so
-- the run cannot finish in between; the run's re-plan count is checked and taken here, so
-- two branches failing at once cannot both use the last re-plan (nor the same id).
-- ARGV[9] the id of the node's dead letter, which the caller added to the DLQ stream
-- just before (the stream is in another Cluster slot: runstate/dead_letters.py): a dead
-- letter exists whenever the node failed, and one whose fail was refused (stale) is
-- deleted by the caller; one whose caller died before this step names a node that did
-- not fail, and its replay is refused.
-- Returns {'status', 'ok', 'run_finished', final run status or '', 'ready',
-- {{node, fence, dispatch}...}, 'dead_letter', its id} or {'status', 'stale'}.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'status', 'stale'} end

release(node)
forget_deaths(node)
redis.call('HDEL', K.waits, node)  -- a replay waits afresh
redis.call('HSET', K.error, node, ARGV[5])
set_final(node, 'failed')
local entry = ARGV[9]
emit('node.failed', node, 'dead_letter', entry)
local ready = {}
settle_dependents(node, 'failed', ready)
if ARGV[6] ~= '' and redis.call('HEXISTS', K.run, 'stopping') == 0 then  -- not while tearing down
  local run = redis.call('HMGET', K.run, 'replans', 'replan_max')
  if tonumber(run[1] or 0) < tonumber(run[2] or 0) then
    local id = ARGV[6] .. redis.call('HINCRBY', K.run, 'replans', 1)
    local spec = string.gsub(ARGV[7], '__replan_id__', id)
    add_internal_node(id, spec, ARGV[8])
    queue_node(id, ready)
  end
end
return {'status', 'ok', 'run_finished', finalize_if_done(), 'ready', ready, 'dead_letter', entry}
