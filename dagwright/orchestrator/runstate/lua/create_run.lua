-- A new run, in one step: its idempotency key (if given), the run index and the active
-- set, the run's hashes, and its root nodes QUEUED (fence 1) in the outbox, so the
-- reconciler publishes them if the submitter dies before it does.
--
-- KEYS: run, plan, spec, deps, dependents, remaining, dispatch, state, fence, attempts,
--       queued, outbox, events (the run's, see keys.RUN_KEY_NAMES), run index, active
--       runs, and the idempotency key if there is one.
-- ARGV: events stream cap, run id, the run hash's fields (JSON object of strings), the
--       plan (JSON), the per-node columns (JSON object: column -> {node -> string}), the
--       roots (JSON list), then the key's TTL in seconds and its stale holder (or '').
-- Reply: {'owner', run}: the new run's id, or the run the key already names (then nothing
-- is written).
local K = {}
for i, name in ipairs({'run', 'plan', 'spec', 'deps', 'dependents', 'remaining', 'dispatch',
    'state', 'fence', 'attempts', 'queued', 'outbox', 'events', 'run_index', 'active_runs',
    'idempotency'}) do
  K[name] = KEYS[i]
end
local EVENTS_MAXLEN, RUN_ID = ARGV[1], ARGV[2]

if K.idempotency then
  local owner = claim_key(K.idempotency, RUN_ID, ARGV[7], ARGV[8])
  if owner ~= RUN_ID then return {'owner', owner} end
end

local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local CHUNK = 500  -- pairs per command: unpack() is bounded by Lua's C stack

-- HSET a whole mapping, a chunk of fields at a time.
local function hset_all(key, mapping)
  local args = {}
  for field, value in pairs(mapping) do
    args[#args + 1] = field
    args[#args + 1] = value
    if #args >= 2 * CHUNK then
      redis.call('HSET', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('HSET', key, unpack(args)) end
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

local function emit(kind, ...)
  redis.call('XADD', K.events, 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'kind', kind, 'at', NOW, ...)
end

local run = cjson.decode(ARGV[3])
local columns = cjson.decode(ARGV[5])
local roots = cjson.decode(ARGV[6])

redis.call('ZADD', K.run_index, NOW, RUN_ID)
redis.call('SADD', K.active_runs, RUN_ID)
run.created_at = NOW
hset_all(K.run, run)
redis.call('SET', K.plan, ARGV[4])
emit('run.submitted', 'nodes', run.total)
for name, mapping in pairs(columns) do hset_all(K[name], mapping) end
local queued, fenced = {}, {}
for _, root in ipairs(roots) do
  queued[root] = 'queued'
  fenced[root] = 1
end
hset_all(K.state, queued)
hset_all(K.fence, fenced)
zadd_now(K.queued, roots)
zadd_now(K.outbox, roots)
for _, root in ipairs(roots) do emit('node.queued', 'node', root, 'fence', '1') end
return {'owner', RUN_ID}
