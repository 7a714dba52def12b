-- Fail a run open past the maximum age (settings.run_max_age_s), as the reconciler finds
-- it (execution/reconciler.py): every node at work or ready to be (queued, running,
-- parked, waiting for an approval, or pending with no dependency left: a run waiting for
-- its concurrency key) fails, each with a dead letter as fail.lua writes it, so that
-- `dlq replay` re-opens the run; the nodes after them are decided by their run_if rules
-- (blocked), and a handler those failures ready fails too: the run ends FAILED now.
-- A run still planning (no nodes yet) ends FAILED. The run hash's `aged_out` says why
-- (status shows it); a replay clears it and restarts the age (replay.lua `reopened_at`).
-- ARGV[3] the maximum age in ms (checked again here, from `created_at` or `reopened_at`),
-- ARGV[4] the error JSON of each failure, ARGV[5] the reason, ARGV[6] the run id,
-- ARGV[7] the DLQ's retention in ms; SHARED[1] the DLQ stream.
-- Returns {'status', final status or the open one if it is not too old, 'running',
-- {nodes that were running}, 'queued', {{node, fence, dispatch}...} of the nodes whose
-- messages may still wait in a queue, 'dead_letters', count}.
local status = run_status()
if not status or not is_open(status) then
  return {'status', tostring(status), 'running', {}, 'queued', {}, 'dead_letters', 0}
end
local run = redis.call('HMGET', K.run, 'created_at', 'reopened_at')
local since = math.max(tonumber(run[1] or NOW), tonumber(run[2] or 0))
if NOW - since < tonumber(ARGV[3]) then
  return {'status', status, 'running', {}, 'queued', {}, 'dead_letters', 0}
end

local AT_WORK = {queued = true, running = true, retry_wait = true, waiting_approval = true}
local running, queued, letters = {}, {}, 0

local function dead_letter(node)
  local spec = redis.call('HGET', K.spec, node)
  return redis.call('XADD', SHARED[1], 'MINID', '~', NOW - tonumber(ARGV[7]), '*',
    'run', ARGV[6], 'node', node, 'fence', redis.call('HGET', K.fence, node) or 0,
    'worker_type', cjson.decode(spec).type, 'spec', spec,
    'attempts', redis.call('HGET', K.attempts, node) or 0,
    'classification', 'transient', 'error_class', 'RunMaxAgeExceeded', 'message', ARGV[5],
    'traceback', '', 'first_failure_ms', redis.call('HGET', K.first_failure, node) or NOW,
    'last_failure_ms', NOW)
end

-- Take `node` (in `state`) out of whatever it was due in, and fail it with a dead letter.
local function age_out_node(node, state)
  if state == 'running' then
    release(node)
    running[#running + 1] = node
  elseif state == 'waiting_approval' then
    redis.call('HINCRBY', K.run, 'waiting_approval', -1)
  end
  local dispatch = redis.call('HGET', K.dispatch, node)
  if state == 'queued' then
    queued[#queued + 1] = {node, redis.call('HGET', K.fence, node), dispatch}
    redis.call('ZREM', K.pool, pool_member(cjson.decode(dispatch).queue, pool_rank(dispatch), node))
  end
  for _, key in ipairs({K.queued, K.outbox, K.retry}) do redis.call('ZREM', key, node) end
  redis.call('HDEL', K.waits, node)
  forget_deaths(node)
  redis.call('HSET', K.error, node, ARGV[4])
  set_final(node, 'failed')
  letters = letters + 1
  emit('node.failed', node, 'dead_letter', dead_letter(node), 'aged_out', 1)
end

local function open_ready_nodes()
  local found = {}
  local states = redis.call('HGETALL', K.state)
  for i = 1, #states, 2 do
    local node, state = states[i], states[i + 1]
    if AT_WORK[state] or (state == 'pending' and counter(K.remaining, node) == 0) then
      found[#found + 1] = {node, state}
    end
  end
  return found
end

redis.call('HSET', K.run, 'aged_out', ARGV[5])
emit('run.aged_out', false, 'max_age_ms', ARGV[3])
redis.call('DEL', K.settling)  -- a release in chunks ends here: every node left is decided now
local batch = open_ready_nodes()
while #batch > 0 do
  for _, item in ipairs(batch) do age_out_node(item[1], item[2]) end
  local ready = {}
  for _, item in ipairs(batch) do settle_dependents(item[1], 'failed', ready) end
  batch = {}
  for _, item in ipairs(ready) do batch[#batch + 1] = {item[1], 'queued'} end
end
local ended = finalize_if_done()
if ended == '' then  -- planning (no nodes yet), or nodes nothing can decide: ends anyway
  stop_open_nodes()
  ended = finish_run('failed')
end
return {'status', ended, 'running', running, 'queued', queued, 'dead_letters', letters}
