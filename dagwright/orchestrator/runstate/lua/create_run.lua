-- A new run, in one step: the run's hash, and its root nodes QUEUED (fence 1) in the
-- outbox, so the reconciler publishes them if the submitter dies before it does. Its
-- idempotency key (if any) is taken before, and the run joins the run index and the
-- active set before too (other Cluster slots: creation.py), so the reconciler sees every
-- run this writes. Its plan and node columns are staged before as well (creation.py
-- stage_run: commands of their own, between which the server serves other clients, where
-- this script writing a 10,000-node run's held it ~60 ms), with a time to live: this
-- makes them the run's, and refuses to write a run whose columns are not there.
--
-- KEYS: run, plan, spec, deps, dependents, remaining, dispatch, state, fence, attempts,
--       queued, outbox, events, run_if, retry, waits, countdown (the run's, see
--       keys.RUN_KEY_NAMES).
-- ARGV: events stream cap, run id, the run hash's fields (JSON object of strings), the
--       roots (JSON list).
-- Reply: {'owner', run, 'parked', {roots}}: the new run's id and its roots that wait instead of being queued (a
-- delayed start, the run's concurrency key: see "Flow control" below).
local K = {}
for i, name in ipairs({'run', 'plan', 'spec', 'deps', 'dependents', 'remaining', 'dispatch',
    'state', 'fence', 'attempts', 'queued', 'outbox', 'events', 'run_if', 'retry', 'waits',
    'countdown'}) do
  K[name] = KEYS[i]
end
local EVENTS_MAXLEN, RUN_ID = ARGV[1], ARGV[2]

local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local CHUNK = 500  -- pairs per command: unpack() is bounded by Lua's C stack

-- HSET a flat {field, value, field, value...} list in its order, a chunk at a time.
local function hset_pairs(key, flat)
  for first = 1, #flat, 2 * CHUNK do
    redis.call('HSET', key, unpack(flat, first, math.min(first + 2 * CHUNK - 1, #flat)))
  end
end

-- HSET a whole mapping whose field order does not matter (the run hash).
local function hset_all(key, mapping)
  local flat = {}
  for field, value in pairs(mapping) do
    flat[#flat + 1] = field
    flat[#flat + 1] = value
  end
  hset_pairs(key, flat)
end

-- ZADD every member of `members` with the score NOW, a chunk at a time.
local function zadd_now(key, members)
  for first = 1, #members, CHUNK do
    local args = {}
    for i = first, math.min(first + CHUNK - 1, #members) do
      args[#args + 1] = NOW
      args[#args + 1] = members[i]
    end
    redis.call('ZADD', key, unpack(args))
  end
end

-- An event's time is its entry id's (as prelude.lua's emit)
local function emit(kind, ...)
  redis.call('XADD', K.events, 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'kind', kind, ...)
end

local run = cjson.decode(ARGV[3])
local roots = cjson.decode(ARGV[4])

-- The staged columns: every node has a spec and a state. Gone (their time to live ran out
-- before this step came), the run is not written: the submit fails and can be sent again.
if redis.call('EXISTS', K.spec) == 0 or redis.call('EXISTS', K.state) == 0 then
  return redis.error_reply("the run's staged columns are gone (creation.py STAGED_TTL_S): submit it again")
end
for _, key in ipairs({K.plan, K.spec, K.deps, K.dependents, K.remaining, K.dispatch, K.state,
                      K.fence, K.attempts, K.run_if, K.countdown}) do
  redis.call('PERSIST', key)
end
run.created_at = NOW
hset_all(K.run, run)
emit('run.submitted', 'nodes', run.total)
-- Flow control (docs/internals/flow-control.md). A run with a concurrency key waits for a
-- place ('gate'), its roots all parked until run_gates.py admits it (admit.lua); else a
-- root due later (the run's not_before, its own countdown) waits in RETRY_WAIT in the
-- retry zset until then. Both say so in K.waits. The rest are queued at once.
local parked = {}
if run.start_delay_ms then
  run.not_before_ms = math.max(tonumber(run.not_before_ms or 0), NOW + tonumber(run.start_delay_ms))
  redis.call('HSET', K.run, 'not_before_ms', run.not_before_ms)
end
local function park_root(root, wait, due_ms)
  parked[#parked + 1] = root
  redis.call('HSET', K.state, root, 'retry_wait')
  if due_ms then redis.call('ZADD', K.retry, due_ms, root) end
  redis.call('HSET', K.waits, root, cjson.encode(wait))
  emit('node.delayed', 'node', root, 'on', wait.on)
end
local function start_or_park(root, startable)
  local countdown = run.countdowns and redis.call('HGET', K.countdown, root)
  local due = math.max(tonumber(run.not_before_ms or 0), NOW + tonumber(countdown or 0))
  if run.concurrency_key then
    park_root(root, {on = 'concurrency', name = run.concurrency_key, since_ms = NOW})
  elseif due > NOW then
    local name = countdown and 'countdown' or 'not_before'
    park_root(root, {on = 'delay', name = name, since_ms = NOW, until_ms = due}, due)
  else
    startable[#startable + 1] = root
  end
end
if run.countdowns or run.not_before_ms or run.concurrency_key then  -- else: nothing to ask
  local startable = {}
  for _, root in ipairs(roots) do start_or_park(root, startable) end
  if run.concurrency_key then redis.call('HSET', K.run, 'gate', 'waiting') end
  roots = startable
end
-- End of flow control.

local queued, fenced = {}, {}
for _, root in ipairs(roots) do
  queued[#queued + 1], queued[#queued + 2] = root, 'queued'
  fenced[#fenced + 1], fenced[#fenced + 2] = root, 1
end
hset_pairs(K.state, queued)
hset_pairs(K.fence, fenced)
zadd_now(K.queued, roots)
zadd_now(K.outbox, roots)
for _, root in ipairs(roots) do emit('node.queued', 'node', root, 'fence', '1') end
return {'owner', RUN_ID, 'parked', parked}
