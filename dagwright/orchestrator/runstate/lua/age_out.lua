-- The second step of failing a run open past the maximum age (age_out_begin.lua, the
-- first, marked it and listed its nodes; the caller then added their dead letters to
-- the DLQ stream): fail each node named, as fail.lua does, naming its dead letter, so
-- that `dlq replay` re-opens the run. A node no longer at work or ready, or under
-- another fence (it moved on between the steps), is refused: the caller deletes its
-- dead letter (a crash before that leaves a letter naming a node that did not fail:
-- its replay is refused, as fail.lua's). The nodes after the failed ones are decided
-- by their run_if rules (blocked); a handler those failures ready is queued (not
-- published: the caller fails it in its next round, from age_out_begin.lua again).
-- Once no node is at work or ready, the run ends FAILED (a run still planning, or with
-- nodes nothing can decide, too).
-- ARGV[3] the error JSON of each failure, ARGV[4..] node, fence, dead letter id, for
-- each node to fail.
-- Returns {'status', final status or the open one, 'running', {nodes that were
-- running}, 'queued', {{node, fence, dispatch}...} of the nodes whose messages may
-- still wait in a queue, 'refused', {dead letter ids not used}, 'failed', count}.
local status = run_status()
if not status or not is_open(status) or not redis.call('HGET', K.run, 'aged_out_at') then
  local refused = {}
  for i = 6, #ARGV, 3 do refused[#refused + 1] = ARGV[i] end
  return {'status', tostring(status), 'running', {}, 'queued', {}, 'refused', refused, 'failed', 0}
end

local AT_WORK = {queued = true, running = true, retry_wait = true, waiting_approval = true}
local running, queued, refused, failed = {}, {}, {}, {}

local function may_age_out(node, state, fence)
  if (redis.call('HGET', K.fence, node) or '0') ~= fence then return false end
  return AT_WORK[state] or (state == 'pending' and counter(K.remaining, node) == 0)
end

-- Take `node` (in `state`) out of whatever it was due in, and fail it naming `entry`.
local function age_out_node(node, state, entry)
  if state == 'running' then
    release(node)
    running[#running + 1] = node
  elseif state == 'waiting_approval' then
    redis.call('HINCRBY', K.run, 'waiting_approval', -1)
  end
  local dispatch = redis.call('HGET', K.dispatch, node)
  if state == 'queued' then
    queued[#queued + 1] = {node, redis.call('HGET', K.fence, node), dispatch}
    pool_remove(pool_member(cjson.decode(dispatch).queue, pool_rank(dispatch), node))
  end
  for _, key in ipairs({K.queued, K.outbox, K.retry}) do redis.call('ZREM', key, node) end
  redis.call('HDEL', K.waits, node)
  forget_deaths(node)
  redis.call('HSET', K.error, node, ARGV[3])
  set_final(node, 'failed')
  emit('node.failed', node, 'dead_letter', entry, 'aged_out', 1)
end

for i = 4, #ARGV, 3 do
  local node, fence, entry = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local state = redis.call('HGET', K.state, node)
  if state and may_age_out(node, state, fence) then
    age_out_node(node, state, entry)
    failed[#failed + 1] = node
  else
    refused[#refused + 1] = entry
  end
end
local ready = {}  -- handlers readied: queued (the outbox), failed in the caller's next round
for _, node in ipairs(failed) do settle_dependents(node, 'failed', ready) end

local function any_left()
  local states = redis.call('HGETALL', K.state)
  for i = 1, #states, 2 do
    if may_age_out(states[i], states[i + 1], redis.call('HGET', K.fence, states[i]) or '0') then
      return true
    end
  end
  return false
end

local ended = status
if not any_left() then
  ended = finalize_if_done()
  if ended == '' then  -- planning (no nodes yet), or nodes nothing can decide: ends anyway
    stop_open_nodes()
    ended = finish_run('failed')
  end
end
return {'status', ended, 'running', running, 'queued', queued, 'refused', refused,
  'failed', #failed}
