-- Claim a queued node for execution: QUEUED + fence -> RUNNING with a lease (the claim
-- itself is prelude.lua claim_all, which complete.lua also makes for the nodes a worker runs next).
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
return claim_queued(node, ARGV[5], holder)
