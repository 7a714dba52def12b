-- Replay a dead letter: its failed node goes back to QUEUED under a new fence, every node
-- whose fate its failure decided goes back to PENDING (a node it blocked and no other
-- failure still blocks; a handler that ran or was skipped after it, and whatever came
-- after that handler: they are decided again when the node ends this time), and a
-- finished run re-opens. A replay is refused while a node downstream of the failed one
-- is still at work (a handler queued or running): it is replayed once that has ended. Completed nodes are kept as they are, and so is the node's
-- checkpoint unless ARGV[5] is '1': an agent resumes after its last paid-for LLM call.
-- ARGV[3] node, ARGV[4] the dead letter's fence, ARGV[5] fresh, ARGV[6] the dead letter's
-- id, ARGV[7] how long its status is kept (s), ARGV[8] the run id; SHARED[1] the dead
-- letter's status key (in the run's slot), set here, so that a dead letter is replayed
-- once; SHARED[2] the run's scores, which persist with the run's keys while it is open
-- again (forget.lua expires them), and SHARED[3] the run's node logs, likewise. The
-- caller adds the run to the active set before and after this step, takes a re-opened
-- run out of the ended runs' sets (keys.ended_runs) and adds the dead letter to the
-- replayed ones still in the stream (keys.dlq_settled) after it: other slots
-- (machine.py replay), so the reconciler publishes its node even if the caller dies.
-- Returns {'status', 'ok', 'reopened', 0/1, 'ready', {{node, fence, dispatch}}},
-- {'status', 'done', 'was', status} if the dead letter was replayed or purged already,
-- {'status', 'busy', 'node', id, 'state', state} if a node downstream still works,
-- or {'status', 'refused', 'why', why}.
local node, fence = ARGV[3], ARGV[4]
local done = redis.call('GET', SHARED[1])
if done then return {'status', 'done', 'was', done} end
local status = run_status()
if not status then return {'status', 'refused', 'why', 'its run has expired'} end
if status == 'cancelled' then return {'status', 'refused', 'why', 'its run was cancelled'} end
local stopped = redis.call('HGET', K.run, 'stop_reason')
if stopped then return {'status', 'refused', 'why', 'its run was stopped (' .. stopped .. ')'} end
local state = redis.call('HGET', K.state, node)
if state ~= 'failed' then
  return {'status', 'refused', 'why', 'the node is ' .. tostring(state) .. ' now, not failed'}
end
if redis.call('HGET', K.fence, node) ~= fence then
  return {'status', 'refused', 'why', 'a later failure of the node supersedes it: replay the newest dead letter'}
end

-- A node downstream of `node` still at work (queued, running, waiting): its name and
-- state, or nil. Such a node ran because of the failure (a handler, or a node after one).
local function busy_downstream()
  local stack, seen = {node}, {}
  while #stack > 0 do
    for _, child in ipairs(cjson.decode(redis.call('HGET', K.dependents, table.remove(stack)))) do
      if not seen[child] then
        seen[child] = true
        local child_state = redis.call('HGET', K.state, child)
        if child_state == 'queued' or child_state == 'running' or child_state == 'retry_wait'
            or child_state == 'waiting_approval' then
          return child, child_state
        end
        stack[#stack + 1] = child
      end
    end
  end
  return nil
end
local busy, busy_state = busy_downstream()
if busy then return {'status', 'busy', 'node', busy, 'state', busy_state} end

local reopened = 0
if not is_open(status) then
  reopened = 1
  local open_status = redis.call('HGET', K.run, 'open_status') or 'running'
  redis.call('HSET', K.run, 'status', open_status)
  redis.call('HDEL', K.run, 'finished_at', 'aged_out', 'aged_out_at')
  redis.call('HSET', K.run, 'reopened_at', NOW)  -- its maximum age counts from here (age_out.lua)
  redis.call('DEL', K.done)  -- waiters block on it: it must hold nothing until the run ends
  for _, key in pairs(K) do redis.call('PERSIST', key) end
  redis.call('PERSIST', SHARED[2])
  redis.call('PERSIST', SHARED[3])
  emit('run.reopened', false, 'dead_letter', ARGV[6])
end

-- A node in a final state leaves it (the opposite of set_final).
local function reopen(child, state)
  redis.call('HDEL', K.finished, child)
  redis.call('HINCRBY', K.run, 'done', -1)
  redis.call('HINCRBY', K.run, state, -1)
end

-- A dependent's counters, counted again from its dependencies' states rather than
-- adjusted by one: right whatever counted them before (a run written before trigger
-- rules never counted its blocked nodes, nor does an older worker's fail.lua).
-- Returns its remaining count.
local function recount(child)
  local remaining, failed, skipped = 0, 0, 0
  for _, dep in ipairs(cjson.decode(redis.call('HGET', K.deps, child))) do
    local dep_state = redis.call('HGET', K.state, dep)
    if dep_state == 'skipped' then
      skipped = skipped + 1
    elseif dep_state == 'failed' or dep_state == 'blocked' or dep_state == 'cancelled'
        or dep_state == 'replaced' then
      failed = failed + 1
    elseif dep_state ~= 'succeeded' then
      remaining = remaining + 1
    end
  end
  redis.call('HSET', K.remaining, child, remaining)
  for key, n in pairs({[K.failed_deps] = failed, [K.skipped_deps] = skipped}) do
    if n > 0 then redis.call('HSET', key, child, n) else redis.call('HDEL', key, child) end
  end
  return remaining
end

-- `node` left its final state: every dependent is counted again, and each whose fate it
-- decided (final, and undecided now) goes back to PENDING, its output or error dropped,
-- its own dependents looked at in turn.
local function unsettle_dependents()
  local stack = {node}
  while #stack > 0 do
    for _, child in ipairs(cjson.decode(redis.call('HGET', K.dependents, table.remove(stack)))) do
      local remaining = recount(child)
      local state = redis.call('HGET', K.state, child)
      if (state == 'blocked' or state == 'skipped' or state == 'succeeded' or state == 'failed')
          and not fate(child, remaining) then
        reopen(child, state)
        redis.call('HSET', K.state, child, 'pending')
        redis.call('HDEL', K.output, child)
        redis.call('HDEL', K.error, child)
        redis.call('HDEL', K.checkpoint, child)  -- its inputs will differ
        redis.call('HDEL', K.first_failure, child)
        redis.call('HSET', K.attempts, child, 0)
        emit(state == 'blocked' and 'node.unblocked' or 'node.reopened', child, 'was', state)
        stack[#stack + 1] = child
      end
    end
  end
end

reopen(node, 'failed')
redis.call('HDEL', K.error, node)  -- its deaths and losses went with its failure (fail.lua)
redis.call('HDEL', K.first_failure, node)
-- A rejected approval is asked again: a replay is someone wanting the node to run.
redis.call('HDEL', K.approvals, 'request:' .. node, 'decision:' .. node)
redis.call('HSET', K.attempts, node, 0)
if ARGV[5] == '1' then redis.call('HDEL', K.checkpoint, node) end
emit('node.replayed', node, 'dead_letter', ARGV[6])
local ready = {}
settle_on(ready)  -- a release in chunks ends first: unsettle_dependents recounts from states
queue_node(node, ready)
unsettle_dependents()
redis.call('SET', SHARED[1], 'replayed', 'EX', ARGV[7])
return {'status', 'ok', 'reopened', reopened, 'ready', ready}
