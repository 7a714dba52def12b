-- Replay a dead letter: its failed node goes back to QUEUED under a new fence, every node
-- its failure blocked (and no other failure still blocks) goes back to PENDING, and a
-- finished run re-opens. Completed nodes are kept as they are, and so is the node's
-- checkpoint unless ARGV[5] is '1': an agent resumes after its last paid-for LLM call.
-- ARGV[3] node, ARGV[4] the dead letter's fence, ARGV[5] fresh, ARGV[6] the dead letter's
-- id, ARGV[7] how long its status is kept (s), ARGV[8] the run id; SHARED[1] the dead
-- letter's status key, set here, so that a dead letter is replayed once; SHARED[2] the
-- set of active runs, which a re-opened run joins in this same step (the reconciler then
-- publishes its node even if this caller dies right after).
-- Returns {'status', 'ok', 'reopened', 0/1, 'ready', {{node, fence, dispatch}}},
-- {'status', 'done', 'was', status} if the dead letter was replayed or purged already,
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

local reopened = 0
if not is_open(status) then
  reopened = 1
  local open_status = redis.call('HGET', K.run, 'open_status') or 'running'
  redis.call('HSET', K.run, 'status', open_status)
  redis.call('HDEL', K.run, 'finished_at')
  redis.call('DEL', K.done)  -- waiters block on it: it must hold nothing until the run ends
  for _, key in pairs(K) do redis.call('PERSIST', key) end
  redis.call('SADD', SHARED[2], ARGV[8])
  emit('run.reopened', false, 'dead_letter', ARGV[6])
end

-- A node in a final state leaves it (the opposite of set_final).
local function reopen(child, state)
  redis.call('HDEL', K.finished, child)
  redis.call('HINCRBY', K.run, 'done', -1)
  redis.call('HINCRBY', K.run, state, -1)
end

-- Whether any dependency of `child` has failed or is blocked (it stays blocked then).
local function still_blocked(child)
  for _, dep in ipairs(cjson.decode(redis.call('HGET', K.deps, child))) do
    local dep_state = redis.call('HGET', K.state, dep)
    if dep_state == 'failed' or dep_state == 'blocked' or dep_state == 'cancelled'
        or dep_state == 'replaced' then
      return true
    end
  end
  return false
end

reopen(node, 'failed')
redis.call('HDEL', K.error, node)  -- its deliveries count went with its failure (fail.lua)
redis.call('HDEL', K.first_failure, node)
-- A rejected approval is asked again: a replay is someone wanting the node to run.
redis.call('HDEL', K.approvals, 'request:' .. node, 'decision:' .. node)
redis.call('HSET', K.attempts, node, 0)
if ARGV[5] == '1' then redis.call('HDEL', K.checkpoint, node) end
emit('node.replayed', node, 'dead_letter', ARGV[6])
local ready = {}
queue_node(node, ready)

-- Unblock downstream: a child is looked at again each time one of its blockers reopens,
-- so one blocked by two replayed branches waits for the second.
local stack = cjson.decode(redis.call('HGET', K.dependents, node))
while #stack > 0 do
  local child = table.remove(stack)
  if redis.call('HGET', K.state, child) == 'blocked' and not still_blocked(child) then
    reopen(child, 'blocked')
    redis.call('HSET', K.state, child, 'pending')
    emit('node.unblocked', child)
    for _, next_child in ipairs(cjson.decode(redis.call('HGET', K.dependents, child))) do
      stack[#stack + 1] = next_child
    end
  end
end
redis.call('SET', SHARED[1], 'replayed', 'EX', ARGV[7])
return {'status', 'ok', 'reopened', reopened, 'ready', ready}
