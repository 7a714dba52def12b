-- Claim a queued node for execution: QUEUED + fence -> RUNNING with a lease.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] lease ms, ARGV[6] holder "<host>:<pid>",
-- ARGV[7] takeover: '' or the holder whose death was confirmed (its node is taken over).
-- Returns {'status', 'ok', 'spec', spec, 'attempt', n, 'checkpoint', JSON or '',
-- 'deaths', n, 'losses', n, 'max_concurrent_nodes', n or '', 'response_cache', '1' or '',
-- 'llm_batch', '1' or '',
-- 'run_inputs', JSON or '', 'inputs', {dep1, out1, ...}} and, for a node with a run_if rule
-- (a handler, which may run after dependencies that did not succeed), 'outcomes', {dep1,
-- state1, ...} (a one_success handler may start while some are still open: their state
-- is 'pending', 'queued', 'running'... and they have no output) and 'errors', {dep,
-- error JSON, ...} of its failed dependencies,
-- {'status', 'held', 'holder', holder} or {'status', 'stale', 'why', why}. Since the node last
-- recorded an outcome: deaths counts the times the process running it died as its worker's
-- surviving parent saw (death.lua: the poison guard), losses the times its whole worker
-- was lost (its lease expired, reconcile.lua), which is no fault of the node.
local node, fence, holder, takeover = ARGV[3], ARGV[4], ARGV[6], ARGV[7]
local status = run_status()
if not is_open(status) then return {'status', 'stale', 'why', 'run is ' .. tostring(status)} end
if redis.call('HGET', K.fence, node) ~= fence then return {'status', 'stale', 'why', 'fence'} end
local state = redis.call('HGET', K.state, node)
if state == 'running' then
  local current = redis.call('HGET', K.holder, node) or ''
  if takeover == '' or current ~= takeover then return {'status', 'held', 'holder', current} end
  release(node)
  emit('node.takeover', node, 'from', current)
elseif state ~= 'queued' then
  return {'status', 'stale', 'why', tostring(state)}
end
redis.call('HSET', K.state, node, 'running')
redis.call('HSET', K.holder, node, holder)
local attempt = redis.call('HINCRBY', K.attempts, node, 1)
redis.call('HSET', K.started, node, NOW)
redis.call('ZREM', K.queued, node)
redis.call('ZREM', K.outbox, node)
redis.call('ZADD', K.leases, NOW + tonumber(ARGV[5]), node)
redis.call('HINCRBY', K.run, 'running', 1)
emit('node.running', node, 'attempt', attempt, 'holder', holder)
local inputs = {}
local deps = cjson.decode(redis.call('HGET', K.deps, node))
-- HMGET in chunks: unpack() of thousands of arguments overflows Lua's C stack.
for first = 1, #deps, 500 do
  local chunk = {}
  for i = first, math.min(first + 499, #deps) do chunk[#chunk + 1] = deps[i] end
  local outputs = redis.call('HMGET', K.output, unpack(chunk))
  for i = 1, #chunk do
    inputs[#inputs + 1] = chunk[i]
    inputs[#inputs + 1] = outputs[i]
  end
end
local reply = {'status', 'ok', 'spec', redis.call('HGET', K.spec, node), 'attempt', attempt,
        'checkpoint', redis.call('HGET', K.checkpoint, node) or '',
        'deaths', redis.call('HGET', K.deaths, node) or 0,
        'losses', redis.call('HGET', K.losses, node) or 0,
        'max_concurrent_nodes', redis.call('HGET', K.run, 'max_concurrent_nodes') or '',
        'response_cache', redis.call('HGET', K.run, 'response_cache') or '',
        'llm_batch', redis.call('HGET', K.run, 'llm_batch') or '',
        'run_inputs', redis.call('HGET', K.run, 'inputs') or '',
        'inputs', inputs}
if redis.call('HEXISTS', K.run_if, node) == 1 then
  local outcomes, errors = {}, {}
  for _, dep in ipairs(deps) do
    local dep_state = redis.call('HGET', K.state, dep)
    outcomes[#outcomes + 1] = dep
    outcomes[#outcomes + 1] = dep_state
    if dep_state == 'failed' then
      errors[#errors + 1] = dep
      errors[#errors + 1] = redis.call('HGET', K.error, dep) or ''
    end
  end
  for _, value in ipairs({'outcomes', outcomes, 'errors', errors}) do
    reply[#reply + 1] = value
  end
end
return reply
