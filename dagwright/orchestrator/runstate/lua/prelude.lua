-- Shared by every run-state script (prepended by scripts.py). KEYS are one run's keys,
-- named in keys.RUN_KEY_NAMES order; ARGV[1] is the event stream cap, ARGV[2] the
-- retention in seconds, and each script's own arguments start at ARGV[3].
-- Time comes from the server, so leases do not depend on the clocks of worker hosts.
local RUN_KEY_NAMES = {__RUN_KEY_NAMES__}
local K = {}
for i, name in ipairs(RUN_KEY_NAMES) do K[name] = KEYS[i] end
-- Keys after the run's own are shared ones a script names itself (the DLQ stream...).
local SHARED = {}
for i = #RUN_KEY_NAMES + 1, #KEYS do SHARED[#SHARED + 1] = KEYS[i] end
local EVENTS_MAXLEN = ARGV[1]
local RETENTION_S = tonumber(ARGV[2])
local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local function emit(kind, node, ...)
  local fields = {'kind', kind, 'at', NOW}
  if node then
    fields[#fields + 1] = 'node'
    fields[#fields + 1] = node
  end
  local extra = {...}
  for i = 1, #extra do fields[#fields + 1] = extra[i] end
  redis.call('XADD', K.events, 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(fields))
end

local function run_status()
  return redis.call('HGET', K.run, 'status')
end

-- A run still at work: being planned, or running its nodes.
local function is_open(status)
  return status == 'running' or status == 'planning'
end

-- True if `node` is in `state` under fencing token `fence` (a string, as on the wire).
local function owns(node, fence, state)
  return redis.call('HGET', K.state, node) == state and redis.call('HGET', K.fence, node) == fence
end

-- Add one of dagwright's own nodes (a re-planner). It may name dependencies that have
-- all succeeded (so that its claim gets their outputs): it is ready at once.
local function add_internal_node(node, spec, dispatch)
  local deps = cjson.decode(spec).depends_on or {}
  redis.call('HSET', K.spec, node, spec)
  redis.call('HSET', K.deps, node, #deps > 0 and cjson.encode(deps) or '[]')
  redis.call('HSET', K.dependents, node, '[]')
  redis.call('HSET', K.remaining, node, 0)
  redis.call('HSET', K.dispatch, node, dispatch)
  redis.call('HSET', K.fence, node, 0)
  redis.call('HSET', K.attempts, node, 0)
  redis.call('HINCRBY', K.run, 'total', 1)
  emit('node.added', node)
end

-- Move a node to QUEUED under a new fence; append (node, fence, dispatch) to `ready`.
local function queue_node(node, ready)
  local fence = redis.call('HINCRBY', K.fence, node, 1)
  redis.call('HSET', K.state, node, 'queued')
  redis.call('ZADD', K.queued, NOW, node)
  redis.call('ZADD', K.outbox, NOW, node)
  emit('node.queued', node, 'fence', fence)
  ready[#ready + 1] = {node, fence, redis.call('HGET', K.dispatch, node)}
end

-- A running node stops running (it finished, failed, will retry, or lost its worker).
-- Its reservation of the run's budget (reserve.lua) goes with it.
local function release(node)
  redis.call('ZREM', K.leases, node)
  redis.call('HDEL', K.holder, node)
  redis.call('HDEL', K.reserved, node)
  redis.call('HINCRBY', K.run, 'running', -1)
end

local function set_final(node, state)
  redis.call('HSET', K.state, node, state)
  redis.call('HSET', K.finished, node, NOW)
  redis.call('HINCRBY', K.run, 'done', 1)
  redis.call('HINCRBY', K.run, state, 1)
end

-- Every pending node downstream of `node` can no longer run: BLOCKED (by `node`).
local function block_downstream(node)
  local stack = cjson.decode(redis.call('HGET', K.dependents, node))
  while #stack > 0 do
    local child = table.remove(stack)
    if redis.call('HGET', K.state, child) == 'pending' then
      set_final(child, 'blocked')
      emit('node.blocked', child, 'by', node)
      for _, next_child in ipairs(cjson.decode(redis.call('HGET', K.dependents, child))) do
        stack[#stack + 1] = next_child
      end
    end
  end
end

local function finish_run(status)
  -- open_status: what a replay re-opens the run as (it may not have been planned yet).
  redis.call('HSET', K.run, 'open_status', run_status(), 'status', status, 'finished_at', NOW)
  emit('run.' .. status, false)
  redis.call('XADD', K.done, '*', 'status', status)
  for _, key in pairs(K) do redis.call('EXPIRE', key, RETENTION_S) end
  return status
end

-- Stop the run's work (a cancel, or its run timeout): every node not yet final becomes
-- CANCELLED and nothing stays due. Returns the nodes that were running (their workers are
-- told to stop) and the queued ones as {node, fence, dispatch} (their messages revoked).
local function stop_open_nodes()
  local running, queued = {}, {}
  local states = redis.call('HGETALL', K.state)
  for i = 1, #states, 2 do
    local node, state = states[i], states[i + 1]
    if state == 'running' then running[#running + 1] = node end
    if state == 'queued' then
      queued[#queued + 1] = {node, redis.call('HGET', K.fence, node), redis.call('HGET', K.dispatch, node)}
    end
    if state ~= 'succeeded' and state ~= 'failed' and state ~= 'blocked' and state ~= 'cancelled'
        and state ~= 'replaced' then
      set_final(node, 'cancelled')
      emit('node.cancelled', node, 'was', state)
    end
  end
  for _, key in ipairs({K.queued, K.outbox, K.leases, K.retry, K.holder}) do
    redis.call('DEL', key)
  end
  redis.call('HSET', K.run, 'running', 0, 'waiting_approval', 0)
  return running, queued
end

-- Finish the run once every node is final; returns the run's final status or ''.
local function finalize_if_done()
  local run = redis.call('HMGET', K.run, 'status', 'total', 'done', 'failed', 'blocked')
  if not is_open(run[1]) or tonumber(run[3]) < tonumber(run[2]) then return '' end
  if tonumber(run[4]) > 0 or tonumber(run[5]) > 0 then return finish_run('failed') end
  return finish_run('succeeded')
end
