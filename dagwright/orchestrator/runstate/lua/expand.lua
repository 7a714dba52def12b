-- A planner node succeeded: add the nodes of its plan to the run, atomically.
-- ARGV[3] planner node, ARGV[4] fence, ARGV[5] its output (the plan JSON),
-- ARGV[6] JSON list of new nodes {id, spec, deps, dependents, dispatch} (dependents among
-- the new nodes only), ARGV[7] JSON list of the run's output node ids ('' = unchanged),
-- ARGV[8] JSON list of failed/blocked nodes this plan replaces ('[]' for a first plan).
-- A new node may depend on existing nodes: one that succeeded is already satisfied, one
-- still open gets the new node as a dependent, and one that has ended otherwise counts
-- as its rule says (a failed one blocks an all_succeeded node).
-- Returns {'status', 'ok', 'run_finished', final run status or '', 'ready',
-- {{node, fence, dispatch}...}} or {'status', 'stale'}.
local planner, fence = ARGV[3], ARGV[4]
if not owns(planner, fence, 'running') then return {'status', 'stale'} end
for _, node in ipairs(cjson.decode(ARGV[8])) do
  local state = redis.call('HGET', K.state, node)
  if state == 'failed' or state == 'blocked' then
    redis.call('HSET', K.state, node, 'replaced')
    redis.call('HINCRBY', K.run, state, -1)
    redis.call('HINCRBY', K.run, 'replaced', 1)
    emit('node.replaced', node, 'by', planner)
  end
end

local new_nodes = cjson.decode(ARGV[6])
local is_new = {}
for _, node in ipairs(new_nodes) do is_new[node.id] = true end
-- A new node counts its existing dependencies' outcomes now (settle_dependents does it
-- for those still open when they end); it is registered as a dependent of every one
-- not succeeded, so that a replay of a failed one re-opens it.
-- 1 if the existing `dep` is still open; else 0, its outcome counted in `node`'s counters.
local function count_existing(node, dep)
  local state = redis.call('HGET', K.state, dep)
  if state == 'succeeded' then return 0 end
  local children = cjson.decode(redis.call('HGET', K.dependents, dep))
  children[#children + 1] = node.id
  redis.call('HSET', K.dependents, dep, cjson.encode(children))
  if state == 'pending' or state == 'queued' or state == 'running' or state == 'retry_wait'
      or state == 'waiting_approval' then
    return 1
  end
  local key = state == 'skipped' and K.skipped_deps or K.failed_deps
  redis.call('HINCRBY', key, node.id, 1)
  return 0
end
for _, node in ipairs(new_nodes) do
  redis.call('HSET', K.spec, node.id, node.spec)
  redis.call('HSET', K.deps, node.id, cjson.encode(node.deps))
  redis.call('HSET', K.dependents, node.id, #node.dependents > 0 and cjson.encode(node.dependents) or '[]')
  redis.call('HSET', K.dispatch, node.id, node.dispatch)
  redis.call('HSET', K.state, node.id, 'pending')
  redis.call('HSET', K.fence, node.id, 0)
  redis.call('HSET', K.attempts, node.id, 0)
  local rule = cjson.decode(node.spec).run_if
  if type(rule) == 'string' and rule ~= 'all_succeeded' then
    redis.call('HSET', K.run_if, node.id, rule)
    redis.call('HSET', K.run, 'trigger_rules', '1')
    rules_in_run = true
  end
  local waiting = 0
  for _, dep in ipairs(node.deps) do
    waiting = waiting + (is_new[dep] and 1 or count_existing(node, dep))
  end
  redis.call('HSET', K.remaining, node.id, waiting)
  local countdown = cjson.decode(node.spec).countdown_s  -- flow control: prelude start_node
  if type(countdown) == 'number' then
    redis.call('HSET', K.countdown, node.id, math.floor(countdown * 1000))
    redis.call('HSET', K.run, 'countdowns', '1')
    countdowns_in_run = true
  end
end
redis.call('HINCRBY', K.run, 'total', #new_nodes)
if ARGV[7] ~= '' then redis.call('HSET', K.run, 'output_nodes', ARGV[7]) end
if redis.call('HGET', K.run, 'status') == 'planning' then
  redis.call('SET', K.plan, ARGV[5])  -- the plan key now holds the plan the goal became
  redis.call('HSET', K.run, 'status', 'running')
  emit('run.planned', false, 'nodes', #new_nodes)
end
local ready = {}
for _, node in ipairs(new_nodes) do
  if redis.call('HGET', K.state, node.id) == 'pending' then
    local verdict = fate(node.id, tonumber(redis.call('HGET', K.remaining, node.id)))
    if verdict == 'queue' then
      start_node(node.id, ready)
    elseif verdict then
      set_final(node.id, verdict)
      emit('node.' .. verdict, node.id, 'by', 'a dependency that did not succeed')
      settle_dependents(node.id, verdict, ready)
    end
  end
end
release(planner)
forget_deaths(planner)
redis.call('HSET', K.output, planner, ARGV[5])
set_final(planner, 'succeeded')
emit('node.succeeded', planner)
return {'status', 'ok', 'run_finished', finalize_if_done(), 'ready', ready}
