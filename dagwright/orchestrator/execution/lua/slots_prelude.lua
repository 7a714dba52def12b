-- Shared by the concurrency-limit scripts (orchestrator/limits.py; prepended by it).
-- KEYS[1] is the registry (limit name -> size); then three keys per limit, in the order
-- the limits are named in the arguments: its holders, waiters and woken zsets. Each limit
-- has its own hash tag ({limits:<name>}): on one server a node's run, type and key limits
-- are taken in one script; on a Cluster each step names one limit, and KEYS[1] is that
-- limit's holders in the registry's place (the registry is another slot): no registry
-- then (REGISTRY nil), limits.py registers and tidies it in steps of their own, and the
-- limits left empty are returned (EMPTIED) for it to tidy.
-- Time comes from the server, as in the run state machine's scripts.
local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local REGISTRY = KEYS[1]
if REGISTRY == KEYS[2] then REGISTRY = nil end
local EMPTIED = {}
local function holders(i) return KEYS[3 * i - 1] end
local function waiters(i) return KEYS[3 * i] end
local function woken(i) return KEYS[3 * i + 1] end

-- A holder whose slot was not renewed (its worker died) frees it.
local function drop_expired(i)
  redis.call('ZREMRANGEBYSCORE', holders(i), '-inf', NOW)
end

-- The limit is listed in the registry with its size (what the reconciler looks at).
local function register(name, size)
  if REGISTRY then redis.call('HSET', REGISTRY, name, size) end
end

-- A limit nobody holds or waits for leaves the registry (a run's limit after its run).
local function tidy(i, name)
  if redis.call('EXISTS', holders(i), waiters(i)) == 0 then
    if REGISTRY then redis.call('HDEL', REGISTRY, name) else EMPTIED[#EMPTIED + 1] = name end
  end
end

-- The waiters that may take limit i's free slots now (the first `room` of them, in the
-- order they first asked), each published at most once per `grace_ms` (its message may be
-- on its way); appended to `out` as {name, member}.
local function wake(i, name, size, grace_ms, out)
  drop_expired(i)
  local room = size - redis.call('ZCARD', holders(i))
  if room > 0 then
    for _, member in ipairs(redis.call('ZRANGE', waiters(i), 0, room - 1)) do
      local at = redis.call('ZSCORE', woken(i), member)
      if (not at) or tonumber(at) <= NOW - grace_ms then
        redis.call('ZADD', woken(i), NOW, member)
        out[#out + 1] = {name, member}
      end
    end
  end
  tidy(i, name)
end
