-- A mapped node's first claim: add one child per item of its list (plans/mapping.py), in
-- one fenced step, so a worker dying mid-spawn spawns nothing (its lease expires and the
-- node is claimed again) and a duplicate message spawns nothing more (the fence moved on).
-- ARGV[3] mapped node, ARGV[4] fence, ARGV[5] JSON list of {id, spec}, in the items' order,
-- ARGV[6] the node its list came from (map.over: each child's spec holds its item instead).
-- Each child depends on the mapped node's other succeeded dependencies (inputs), has the
-- mapped node's dispatch and is queued at once. The mapped node goes back to PENDING with
-- its children as its dependencies (its K.dependents are left as they were): when they
-- have ended, its run_if decides it, and its claim then joins their outputs. With no
-- item, it succeeds at once with [].
-- Returns {'status', 'ok', 'run_finished', final status or '', 'ready', {{node, fence,
-- dispatch}...}} or {'status', 'stale'}.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'status', 'stale'} end
local children = cjson.decode(ARGV[5])
release(node)
forget_deaths(node)
local ready = {}
if #children == 0 then
  redis.call('HSET', K.output, node, '[]')
  set_final(node, 'succeeded')
  emit('node.mapped', node, 'items', 0)
  emit('node.succeeded', node)
  settle_dependents(node, 'succeeded', ready)
  return {'status', 'ok', 'run_finished', finalize_if_done(), 'ready', ready}
end
local inputs = {}
for _, dep in ipairs(cjson.decode(redis.call('HGET', K.deps, node))) do
  if dep ~= ARGV[6] and redis.call('HGET', K.state, dep) == 'succeeded' then
    inputs[#inputs + 1] = dep
  end
end
local inputs_json = #inputs > 0 and cjson.encode(inputs) or '[]'
local dispatch = redis.call('HGET', K.dispatch, node)
local dependents = cjson.encode({node})
local ids = {}
for _, child in ipairs(children) do
  ids[#ids + 1] = child.id
  redis.call('HSET', K.spec, child.id, child.spec)
  redis.call('HSET', K.deps, child.id, inputs_json)
  redis.call('HSET', K.dependents, child.id, dependents)
  redis.call('HSET', K.remaining, child.id, 0)
  redis.call('HSET', K.dispatch, child.id, dispatch)
  redis.call('HSET', K.fence, child.id, 0)
  redis.call('HSET', K.attempts, child.id, 0)
  emit('node.added', child.id, 'by', node)
end
redis.call('HINCRBY', K.run, 'total', #children)
redis.call('HSET', K.deps, node, cjson.encode(ids))
redis.call('HSET', K.remaining, node, #children)
redis.call('HDEL', K.failed_deps, node)
redis.call('HDEL', K.skipped_deps, node)
redis.call('HSET', K.attempts, node, 0)  -- its join is its first attempt at an output
redis.call('HSET', K.state, node, 'pending')
emit('node.mapped', node, 'items', #children)
for _, id in ipairs(ids) do queue_node(id, ready) end
return {'status', 'ok', 'run_finished', '', 'ready', ready}
