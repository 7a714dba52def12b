-- Record a node's final failure and its dead letter; its dependents are decided by their
-- run_if rules (settle_dependents): an all_succeeded or none_failed one, and every
-- all_succeeded node after it, becomes BLOCKED; an any_failed or all_done handler runs
-- once its dependencies have all ended (a one_success one at the first success). Independent branches keep running, so their work is kept for a replay.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] error JSON; to re-plan the failed subgraph, also
-- ARGV[6] the re-planners' id prefix, ARGV[7] a re-planner's spec with __replan_id__ for
-- its id, ARGV[8] its dispatch (else ''). The re-planner is added in the same step, so
-- the run cannot finish in between; the run's re-plan count is checked and taken here, so
-- two branches failing at once cannot both use the last re-plan (nor the same id).
-- ARGV[9] the run id, ARGV[10] the failure's classification, ARGV[11] the DLQ's
-- retention in ms; SHARED[1] the DLQ stream. Written in this same fenced step, a dead
-- letter exists exactly when the node failed, once per (run, node, fence).
-- Returns {'status', 'ok', 'run_finished', final run status or '', 'ready',
-- {{node, fence, dispatch}...}, 'dead_letter', its id} or {'status', 'stale'}.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'status', 'stale'} end

local function text(value)  -- a JSON null decodes to a (truthy) userdata
  if value == nil or value == cjson.null then return '' end
  return value
end

local function dead_letter()
  local err = cjson.decode(ARGV[5])
  local spec = redis.call('HGET', K.spec, node)
  return redis.call('XADD', SHARED[1], 'MINID', '~', NOW - tonumber(ARGV[11]), '*',
    'run', ARGV[9], 'node', node, 'fence', fence,
    'worker_type', cjson.decode(spec).type, 'spec', spec,
    'attempts', redis.call('HGET', K.attempts, node) or 0,
    'classification', ARGV[10],
    'error_class', text(err.error_class), 'message', text(err.message),
    'traceback', text(err.traceback),
    'first_failure_ms', redis.call('HGET', K.first_failure, node) or NOW,
    'last_failure_ms', NOW)
end

release(node)
forget_deaths(node)
redis.call('HDEL', K.waits, node)  -- a replay waits afresh
redis.call('HSET', K.error, node, ARGV[5])
set_final(node, 'failed')
local entry = dead_letter()
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
