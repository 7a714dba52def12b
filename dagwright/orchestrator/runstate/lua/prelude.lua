-- Shared by every run-state script (prepended by scripts.py). KEYS are one run's keys,
-- named in keys.RUN_KEY_NAMES order; ARGV[1] is the event stream cap, ARGV[2] the
-- retention in seconds, and each script's own arguments start at ARGV[3].
-- Time comes from the server, so leases do not depend on the clocks of worker hosts.
-- Loaded once as a function library (scripts.py: FCALL), this text runs once per load and
-- each script is a function that calls enter() first; sent as EVALSHA (a server without
-- functions), it runs on every call, enter() after it. So what differs per call is only
-- set in enter(): the helpers below are made once, not once per node (decision 118).
local RUN_KEY_NAMES = {__RUN_KEY_NAMES__}
local K, SHARED, POOLED, EVENTS_MAXLEN, RETENTION_S, NOW
-- The run whose key table K is: a worker's calls come run after run for the same run (a
-- chain, a fan-out), and a 39-key table made on every call was a tenth of complete.lua's
-- cost. Scripts only read K.
local K_OF
-- Per call: whether the run has countdowns, trigger rules (looked up once, on demand), the
-- chunked release's budget and whether it left some (settle_dependents, below), and
-- whether nodes readied now are queued later (queue_node: complete.lua's run on).
local countdowns_in_run, rules_in_run, settle_budget, settling_left, defer_queueing
-- The run's fields every claim answers with (claim_all), read once per call: a call
-- claiming a batch of a fan-out's nodes reads them once, not once a node.
local run_claim_fields
-- The run's running count as finalize_if_done read it, per call: complete.lua answers with
-- it when its step changed that count by nothing (a chain's node: one done, one claimed).
local run_running
-- A claim's inputs by its deps text, per call: a batch of a fan-out's nodes, which all
-- depend on the same node, reads that node's output (often the fan-out's whole list of
-- items) once, not once a node. Outputs do not change once written.
local claim_inputs

-- Keys after the run's own are shared ones a script names itself (the DLQ stream...);
-- the last key is always the pooled-nodes counter (appended by machine.py to every call),
-- which is not among them: the deployment's (keys.pooled_nodes) on one server, the run's
-- own (keys.run_pooled, in its slot) on a Cluster, totalled by the reconcilers there.
local function enter(keys, argv)
  if keys[1] ~= K_OF then
    K = __RUN_KEY_TABLE__  -- {run = keys[1], ...}: a loop over the names costs more
    K_OF = keys[1]
  end
  SHARED = {}
  for i = #RUN_KEY_NAMES + 1, #keys - 1 do SHARED[#SHARED + 1] = keys[i] end
  POOLED = keys[#keys]
  EVENTS_MAXLEN = argv[1]
  RETENTION_S = tonumber(argv[2])
  local clock = redis.call('TIME')
  NOW = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  countdowns_in_run, rules_in_run, settle_budget, settling_left = nil, nil, nil, false
  defer_queueing, run_claim_fields, claim_inputs, run_running = false, nil, {}, nil
end

-- An event's time is its entry id's: XADD takes it from the server's clock, as NOW (the
-- script's time: the same ms), so no `at` field repeats it (~14 B of an event's ~56;
-- models.event_of reads the id, and an `at` a stream written before still holds).
local function emit(kind, node, ...)
  local fields = {'kind', kind}
  if node then
    fields[#fields + 1] = 'node'
    fields[#fields + 1] = node
  end
  local extra = {...}
  for i = 1, #extra do fields[#fields + 1] = extra[i] end
  redis.call('XADD', K.events, 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(fields))
end

-- The decoded value of a JSON column that calls read again and again: a node's dispatch
-- (one text for every node of a type) and dependents or deps lists, among them a big
-- fan-out's, which each of its release chunks would decode whole (10,000 ids: 1 ms a
-- chunk, a tenth of a fan-out node's script). Keyed by the text itself: Lua interns its
-- strings, so an equal text finds its value and a changed one (a map's dependents grown
-- by expand.lua) is decoded anew. Kept across calls like K, up to DECODED_TEXTS texts and
-- DECODED_BYTES of them: a chain's lists are each read once or twice, and a table of all
-- of them would cost more (rehashes, the collector's sweeps) than their decoding.
-- Callers only read what it returns.
local DECODED_TEXTS, DECODED_BYTES = 256, 8 * 1024 * 1024
local decoded_values, decoded_texts, decoded_bytes = {}, 0, 0
local function decoded(text)
  local value = decoded_values[text]
  if value == nil then
    value = cjson.decode(text)
    if decoded_texts >= DECODED_TEXTS or decoded_bytes + #text > DECODED_BYTES then
      decoded_values, decoded_texts, decoded_bytes = {}, 0, 0
    end
    decoded_values[text] = value
    decoded_texts, decoded_bytes = decoded_texts + 1, decoded_bytes + #text
  end
  return value
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

-- A recorded outcome (success, failure, retry, wait) forgets how often the process running
-- the node died (K.deaths, the poison guard) and how often its worker was lost (K.losses).
local function forget_deaths_of(nodes)
  redis.call('HDEL', K.deaths, unpack(nodes))
  redis.call('HDEL', K.losses, unpack(nodes))
end

local function forget_deaths(node)
  forget_deaths_of({node})
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

-- A readied node enters QUEUED: in the queued and outbox sets, its event written. One
-- going into the run's pool (`pooled`: refill_pool) stays out of the outbox, as pool.lua
-- takes a pooled node out of it.
local function enter_queued(node, fence, pooled)
  redis.call('HSET', K.state, node, 'queued')
  redis.call('ZADD', K.queued, NOW, node)
  if not pooled then redis.call('ZADD', K.outbox, NOW, node) end
  emit('node.queued', node, 'fence', fence)
end

-- Move a node to QUEUED under a new fence; append (node, fence, dispatch) to `ready`.
-- With defer_queueing (complete.lua for a worker that runs on), only the fence is taken
-- now: the row is marked 'new' and queue_deferred enters it later, unless the worker
-- claims it first in the same step (claim_kept), so the node it runs next never goes
-- through QUEUED, its sets and its event (six calls of a chain's node).
local function queue_node(node, ready)
  local fence = redis.call('HINCRBY', K.fence, node, 1)
  if not defer_queueing then enter_queued(node, fence) end
  ready[#ready + 1] = {node, fence, redis.call('HGET', K.dispatch, node), defer_queueing and 'new' or nil}
end

-- Flow control waits (docs/internals/flow-control.md). A node due later than now waits in
-- RETRY_WAIT in the retry zset, which the reconciler releases when due (reconcile.lua);
-- K.waits says what it waits on, for `status`. Cancel and the run timeout clear it
-- with the other retries (stop_open_nodes).
local function park_until(node, due_ms, on, name)
  redis.call('HSET', K.state, node, 'retry_wait')
  redis.call('ZADD', K.retry, due_ms, node)
  redis.call('HSET', K.waits, node, cjson.encode({on = on, name = name, since_ms = NOW, until_ms = due_ms}))
  emit('node.delayed', node, 'on', on, 'until_ms', due_ms)
end

-- Whether the run has countdowns and trigger rules (creation.py, expand.lua set the run's
-- fields), and the run's fields every claim answers with (claim_all): one HMGET per call,
-- the first time any is asked, as a chain's node asks them all.
local function read_run_flags()
  local fields = redis.call('HMGET', K.run, 'countdowns', 'trigger_rules',
                            'max_concurrent_nodes', 'response_cache', 'llm_batch', 'inputs')
  countdowns_in_run, rules_in_run = fields[1] ~= false, fields[2] ~= false
  run_claim_fields = {fields[3], fields[4], fields[5], fields[6]}
end

-- Queue a node that became ready, unless its countdown (Node.countdown_s, kept in
-- K.countdown) or `not_before_ms` (a root's: the run's delayed start) holds it back; a
-- run without countdowns pays one look per script (read_run_flags).
local function start_node(node, ready, not_before_ms)
  if countdowns_in_run == nil then read_run_flags() end
  local countdown = countdowns_in_run and redis.call('HGET', K.countdown, node)
  local due = math.max(NOW + tonumber(countdown or 0), tonumber(not_before_ms or 0))
  if due > NOW then
    park_until(node, due, 'delay', countdown and 'countdown' or 'not_before')
  else
    queue_node(node, ready)
  end
end
-- End of flow control waits.

-- The run's pool (pool.lua, execution/pool.py): queued nodes of a big fan-out left
-- unpublished, which the workers of their queue pull as they finish a node. A member is
-- '<queue>\t<rank>\t<node>', all scored 0, so one queue's nodes are one lexicographic
-- range, most urgent first: the rank is one digit, 0 for the highest priority
-- (pool_rank). Members of older versions, '<queue>\t<node>', rank as the default.
local function pool_member(queue, rank, node)
  return queue .. '\t' .. rank .. '\t' .. node
end

-- A node's rank in the pool from its dispatch JSON: MAX_PRIORITY (5) less its priority
-- (3 when its run predates priorities; models.py).
local function pool_rank(dispatch)
  return tostring(5 - (decoded(dispatch).priority or 3))
end

local function member_rank(member)
  return string.match(member, '\t(%d)\t') or '2'
end

local function pooled_node(member)
  return string.match(member, '[^\t]*$')
end

-- `list` as a set: {item = true}.
local function set_of(list)
  local set = {}
  for _, item in ipairs(list) do set[item] = true end
  return set
end

-- `list` cut into lists of at most 500 items: a command's arguments unpack()ed from a
-- longer one would overflow Lua's C stack.
local function chunks(list)
  local cut = {}
  for first = 1, #list, 500 do cut[#cut + 1] = {unpack(list, first, math.min(first + 499, #list))} end
  return cut
end

local function member_queue(member)
  return string.match(member, '^[^\t]*')
end

-- The ready backlog (execution/backlog.py): POOLED counts, per queue, the nodes waiting
-- in every run's pool, and the dependents a fan-out released in chunks has yet to count
-- (K.settling: settle_some, settling_clear), kept in the step that changes them, so that
-- a queue's ready nodes (messages waiting + these) are two reads, never a scan of the
-- runs. Every change of K.pool goes through the helpers below. A count that would
-- go below zero (drift: repaired by the reconciler's recount) is dropped, read as 0.
local function count_pooled(queue, delta)
  if redis.call('HINCRBY', POOLED, queue, delta) <= 0 then redis.call('HDEL', POOLED, queue) end
end

-- `tally`, if given, counts the nodes added (or removed) per queue, for the caller to
-- count once (count_tallied) after many: one HINCRBY per queue, not one per node.
local function pool_add(queue, rank, node, tally)
  if redis.call('ZADD', K.pool, 0, pool_member(queue, rank, node)) == 1 then
    if tally then tally[queue] = (tally[queue] or 0) + 1 else count_pooled(queue, 1) end
  end
end

local function count_tallied(tally)
  for queue, delta in pairs(tally) do count_pooled(queue, delta) end
end

local function pool_remove(member)
  if redis.call('ZREM', K.pool, member) == 1 then count_pooled(member_queue(member), -1) end
end

-- Empty the run's pool (a stop, the run's end), its nodes uncounted.
local function pool_clear()
  local by_queue = {}
  for _, member in ipairs(redis.call('ZRANGE', K.pool, 0, -1)) do
    local queue = member_queue(member)
    by_queue[queue] = (by_queue[queue] or 0) + 1
  end
  for queue, count in pairs(by_queue) do count_pooled(queue, -count) end
  redis.call('DEL', K.pool)
end

-- Take `members` (read from the pool in this step) out of it; append those whose node is
-- still queued to `ready` as nodes to dispatch, back in the outbox, so a worker dying
-- before its claim loses nothing (the reconciler publishes them). With defer_queueing a
-- row is marked 'pooled' and goes back in the outbox at queue_deferred, unless claimed in
-- the step (see queue_node). One command of each kind for them all (a batch's pull:
-- decision 124). Returns how many were appended; `tally` counts those taken out per queue
-- (negative), for the caller to count once (count_tallied).
local function unpool_all(members, ready, tally)
  redis.call('ZREM', K.pool, unpack(members))
  local nodes = {}
  for i, member in ipairs(members) do
    local queue = member_queue(member)
    tally[queue] = (tally[queue] or 0) - 1
    nodes[i] = pooled_node(member)
  end
  local states = redis.call('HMGET', K.state, unpack(nodes))
  local fences = redis.call('HMGET', K.fence, unpack(nodes))
  local dispatches = redis.call('HMGET', K.dispatch, unpack(nodes))
  local outbox, appended = {}, 0
  for i, node in ipairs(nodes) do
    if states[i] == 'queued' then
      outbox[#outbox + 1] = NOW
      outbox[#outbox + 1] = node
      ready[#ready + 1] = {node, fences[i], dispatches[i], defer_queueing and 'pooled' or nil}
      appended = appended + 1
    end
  end
  if #outbox > 0 and not defer_queueing then redis.call('ZADD', K.outbox, unpack(outbox)) end
  return appended
end

-- The rows queue_node and unpool left for later (defer_queueing) enter QUEUED, or go back
-- in the outbox, now; their marks go, so `ready` is {node, fence, dispatch} rows again.
local function queue_deferred(ready)
  for _, item in ipairs(ready) do
    if item[4] == 'new' then
      enter_queued(item[1], item[2])
    elseif item[4] == 'pooled' then
      redis.call('ZADD', K.outbox, NOW, item[1])
    end
    item[4] = nil
  end
  defer_queueing = false
end

-- The release of a fan-out in chunks (settle_dependents, below): the chunk, and the step
-- that counts on (settle_budget, settling_left: per call, above).
local SETTLE_CHUNK = __SETTLE_CHUNK__
local settle_on

-- Pulling from the pool (pull_from_pool, below) takes the most urgent nodes of `queues`
-- into `ready`, the first of each queue's range (the first queue on a tie). Every pull stamps
-- pool_pulled_at: a pool nobody pulls from for a while has lost its workers
-- (reconcile.lua publishes it). A pool this pull drains, or finds drained, while a
-- fan-out is released in chunks (K.settling) gets the next chunk in the same step: its
-- nodes of `queues` go straight into the pool (as pool.lua would put them: out of the
-- outbox), but one for the caller to keep when the pull found none; its other nodes go
-- in `ready`, for the caller to dispatch. So the pool is never empty while a chunk is
-- left, and the release goes as fast as the run's workers pull. The chunk's nodes are
-- queued here, not by settle_on (defer_queueing): a pooled one never enters the outbox
-- it would leave at once, and the pooled count moves once per queue, not once per node.
local function refill_pool(queues, ready, pulled)
  if not settle_budget or redis.call('EXISTS', K.pool) == 1 or redis.call('EXISTS', K.settling) == 0 then
    return
  end
  local wanted = set_of(queues)
  local chunk = {}
  local deferring = defer_queueing
  defer_queueing = true
  settle_on(chunk)
  defer_queueing = deferring
  local added = {}
  for _, item in ipairs(chunk) do
    local node, fence, dispatch = item[1], item[2], item[3]
    local queue = decoded(dispatch).queue
    if not wanted[queue] or not pulled then
      -- with the caller deferring, the row keeps its 'new' mark (queue_deferred)
      if not deferring then enter_queued(node, fence); item[4] = nil end
      ready[#ready + 1] = item
      pulled = pulled or wanted[queue]
    else
      enter_queued(node, fence, true)
      pool_add(queue, pool_rank(dispatch), node, added)
    end
  end
  count_tallied(added)
end

-- The first `count` members of the pool on `queues`, most urgent first (the first queue
-- on a tie): each queue's range is in rank order, so its first `count` are enough.
local function pool_heads(queues, count)
  local found = {}
  for position, queue in ipairs(queues) do
    local prefix = queue .. '\t'
    local heads = redis.call('ZRANGEBYLEX', K.pool, '[' .. prefix, '(' .. prefix .. '\255', 'LIMIT', 0, count)
    if #queues == 1 then return heads end
    for order, member in ipairs(heads) do
      found[#found + 1] = {member_rank(member), position, order, member}
    end
  end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[3] < b[3]
  end)
  local heads = {}
  for i = 1, math.min(count, #found) do heads[i] = found[i][4] end
  return heads
end

-- Take up to `count` pooled nodes of `queues` into `ready` (a worker taking a batch of a
-- fan-out's quick nodes: complete.lua), skipping members whose node is no longer queued.
local function pull_from_pool(queues, ready, count)
  count = count or 1
  local pulled, removed = 0, {}
  while pulled < count do
    local heads = pool_heads(queues, count - pulled)
    if #heads == 0 then break end
    redis.call('HSET', K.run, 'pool_pulled_at', NOW)
    pulled = pulled + unpool_all(heads, ready, removed)
  end
  count_tallied(removed)
  return refill_pool(queues, ready, pulled > 0)
end

-- Whether `ready` holds a node of one of `queues` (the worker keeps it: no pull needed).
local function readies_one_of(ready, queues)
  local wanted = set_of(queues)
  for _, item in ipairs(ready) do
    if wanted[decoded(item[3]).queue] then return true end
  end
  return false
end

-- A running node stops running (it finished, failed, will retry, or lost its worker).
-- Its reservation of the run's budget (reserve.lua) goes with it. release_all and
-- set_all_final take one command of each kind for several `nodes` (a batch's successes:
-- complete.lua, decision 124, which settles the run's running count itself, once);
-- release and set_final are theirs of one node, release counting it.
local function release_all(nodes)
  redis.call('ZREM', K.leases, unpack(nodes))
  redis.call('HDEL', K.holder, unpack(nodes))
  redis.call('HDEL', K.reserved, unpack(nodes))
end

local function release(node)
  release_all({node})
  redis.call('HINCRBY', K.run, 'running', -1)
end

-- HSET's arguments for `nodes`, each to `value`.
local function node_pairs(nodes, value)
  local fields = {}
  for _, node in ipairs(nodes) do
    fields[#fields + 1] = node
    fields[#fields + 1] = value
  end
  return fields
end

local function set_all_final(nodes, state)
  redis.call('HSET', K.state, unpack(node_pairs(nodes, state)))
  redis.call('HSET', K.finished, unpack(node_pairs(nodes, NOW)))
  redis.call('HINCRBY', K.run, 'done', #nodes)
  redis.call('HINCRBY', K.run, state, #nodes)
end

local function set_final(node, state)
  set_all_final({node}, state)
end

-- Trigger rules. A node's rule (K.run_if, kept only for nodes whose rule is not
-- all_succeeded) decides its fate from three counters over its dependencies, kept by
-- every final transition of a dependency (settle_dependents) and counted again from the
-- dependencies' states by a replay (replay.lua): K.remaining (not yet final), K.failed_deps (failed or blocked)
-- and K.skipped_deps (skipped). Deciding is O(1) per dependent: advancing stays
-- O(out-degree) of the node that finished.
local function run_has_rules()
  if rules_in_run == nil then read_run_flags() end
  return rules_in_run
end

local function counter(key, node)
  return tonumber(redis.call('HGET', key, node) or 0)
end

local function rule_of(node)
  if not run_has_rules() then return 'all_succeeded' end
  return redis.call('HGET', K.run_if, node) or 'all_succeeded'
end

-- How many of `node`'s dependencies succeeded, from its counters: the final ones less
-- those that failed, were blocked or skipped. O(dependencies): only one_success asks,
-- and only when no success was just counted.
local function succeeded_deps(node, remaining)
  local deps = #decoded(redis.call('HGET', K.deps, node))
  return deps - remaining - counter(K.failed_deps, node) - counter(K.skipped_deps, node)
end

-- one_success: queued at the first success, its other dependencies may still be at
-- work; once all are final and none succeeded, blocked if one failed, else skipped.
local function one_success_fate(node, remaining, outcome)
  if outcome == 'succeeded' or (outcome == nil and succeeded_deps(node, remaining) > 0) then
    return 'queue'
  end
  if remaining > 0 then return false end
  return counter(K.failed_deps, node) > 0 and 'blocked' or 'skipped'
end

-- What becomes of a not-yet-run node with `remaining` dependencies still open: 'queue',
-- 'blocked', 'skipped', or false (it waits). all_succeeded: blocked at the first failed
-- or blocked dependency (at once, as Airflow's upstream_failed), skipped if a dependency
-- was skipped; none_failed: blocked at the first failure too, queued once all are final
-- (skipped ones allowed); all_done: runs once all are final; any_failed: once all are
-- final, runs if one failed or was blocked, else is skipped; one_success: see above.
-- `outcome`: the final state just counted (nil: any); after a success, a node still
-- pending under a rule that waits for all has no failure to look for (the first one
-- would have blocked it), which keeps the hot path short.
local function fate(node, remaining, outcome)
  if remaining > 0 and outcome == 'succeeded' and not run_has_rules() then return false end
  local rule = rule_of(node)
  if rule == 'one_success' then return one_success_fate(node, remaining, outcome) end
  if remaining > 0 and outcome == 'succeeded' then return false end  -- no rule decides yet
  if rule == 'all_succeeded' or rule == 'none_failed' then
    if outcome ~= 'succeeded' and counter(K.failed_deps, node) > 0 then return 'blocked' end
    if remaining > 0 then return false end
    if rule == 'all_succeeded' and run_has_rules() and counter(K.skipped_deps, node) > 0 then
      return 'skipped'
    end
    return 'queue'
  end
  if remaining > 0 then return false end
  if rule == 'all_done' or rule == 'always' or counter(K.failed_deps, node) > 0 then
    return 'queue'
  end
  return 'skipped'
end

-- Count a dependency's final `outcome` in `child`'s counters; returns its remaining count.
local function count_outcome(child, outcome)
  if outcome == 'failed' or outcome == 'blocked' then
    redis.call('HINCRBY', K.failed_deps, child, 1)
  elseif outcome == 'skipped' then
    redis.call('HINCRBY', K.skipped_deps, child, 1)
  end
  return redis.call('HINCRBY', K.remaining, child, -1)
end

-- Releasing a big fan-out in chunks (docs/architecture.md §2, "Priorities and fairness").
-- Valkey runs one script at a time: a success readying thousands of dependents in one
-- step would hold every other run's submit and claim behind it. A script that sets
-- `settle_budget` (complete.lua, settle.lua, reconcile.lua) counts at most that many
-- dependents; a node whose dependents are not all counted is kept in K.settling as
-- [outcome, offset, end, at_ms] (its first `offset` of `end` counted: dependents a map
-- appends later count it themselves, expand.lua), counted on from there by whoever needs
-- the next chunk: a worker draining the run's pool (pull_from_pool), the worker
-- that completed the node when nothing of it was pooled (settle.lua, chunk after chunk:
-- no worker pulls), the reconciler for an entry untouched for its grace while the pool is
-- empty or idle (its workers died). Other scripts leave the budget nil: unbounded, as
-- before. Its size: SETTLE_CHUNK in scripts.py.

-- Count the outcome of item = {node, outcome, offset, end, resumed} in its dependents
-- from `offset`, deciding each (see settle_dependents); cascades are pushed on `stack`.
-- What the budget leaves is kept in K.settling.
-- The queue the ready backlog counts an entry's uncounted dependents on (POOLED, above):
-- the queue of the first of them, for all of them (a fan-out is most often of one
-- type); one look, not one per dependent, which is what chunks spare.
local function dependents_queue(children, index)
  local dispatch = children[index] and redis.call('HGET', K.dispatch, children[index])
  return dispatch and decoded(dispatch).queue or nil
end

local function settle_some(item, stack, ready)
  local node, outcome = item[1], item[2]
  if item[5] and settle_budget ~= nil and settle_budget <= 0 then return end  -- kept as it is
  local children = decoded(redis.call('HGET', K.dependents, node))
  local last = item[4] or #children
  local i = item[3] or 0
  -- the entry's dependents still to count are in the ready backlog on its queue (item[6];
  -- an entry of an older version has none and is not counted)
  local queue = item[6]
  local before = (item[5] and queue) and (last - i) or 0
  while i < last and (settle_budget == nil or settle_budget > 0) do
    i = i + 1
    if settle_budget then settle_budget = settle_budget - 1 end
    local child = children[i]
    local remaining = count_outcome(child, outcome)
    if redis.call('HGET', K.state, child) == 'pending' then
      local verdict = fate(child, remaining, outcome)
      if verdict == 'queue' then
        start_node(child, ready)
      elseif verdict then
        set_final(child, verdict)
        emit('node.' .. verdict, child, 'by', node)
        stack[#stack + 1] = {child, verdict}
      end
    end
  end
  if i < last then
    if not item[5] then queue = dependents_queue(children, i + 1) end
    redis.call('HSET', K.settling, node, cjson.encode({outcome, i, last, NOW, queue}))
    settling_left = true
  elseif item[5] then
    redis.call('HDEL', K.settling, node)
  end
  local after = (queue and i < last) and (last - i) or 0
  if queue and after ~= before then count_pooled(queue, after - before) end
end

-- `node` reached the final state `outcome`: count it in each dependent's counters and
-- decide every pending dependent: queue it (appended to `ready`) or make it final
-- (blocked or skipped), which settles its own dependents in turn, 'by' `node`. Past the
-- script's settle_budget, what is left waits in K.settling (above).
local function settle_dependents(node, outcome, ready)
  local stack = {{node, outcome}}
  while #stack > 0 do settle_some(table.remove(stack), stack, ready) end
end

-- Count on the nodes K.settling holds (those untouched since `older_than_ms`, if given)
-- within the script's settle_budget. Returns whether some are left, and whether it
-- counted any.
settle_on = function(ready, older_than_ms)
  local entries = redis.call('HGETALL', K.settling)
  local stack = {}
  for i = 1, #entries, 2 do
    local entry = cjson.decode(entries[i + 1])
    if not older_than_ms or tonumber(entry[4]) < older_than_ms then
      stack[#stack + 1] = {entries[i], entry[1], entry[2], entry[3], true, entry[5]}
    end
  end
  local counted = #stack > 0
  -- to the end of the stack: past the budget, a node a cascade made final is kept in
  -- K.settling, an entry untouched stays as it was
  while #stack > 0 do settle_some(table.remove(stack), stack, ready) end
  return #entries > 0 and redis.call('EXISTS', K.settling) == 1, counted
end

-- Drop the run's K.settling (a stop, the run's end), its uncounted dependents out of the
-- ready backlog.
local function settling_clear()
  local entries = redis.call('HGETALL', K.settling)
  for i = 2, #entries, 2 do
    local entry = cjson.decode(entries[i])
    if entry[5] then count_pooled(entry[5], tonumber(entry[2]) - tonumber(entry[3])) end
  end
  redis.call('DEL', K.settling)
end

local function finish_run(status)
  -- open_status: what a replay re-opens the run as (it may not have been planned yet).
  redis.call('HSET', K.run, 'open_status', run_status(), 'status', status, 'finished_at', NOW)
  emit('run.' .. status, false)
  redis.call('XADD', K.done, '*', 'status', status)
  settling_clear()  -- only final nodes were left to count: a replay recounts
  pool_clear()  -- only members of nodes no longer queued can be left: none is ready
  for _, key in pairs(K) do redis.call('EXPIRE', key, RETENTION_S) end
  return status
end

local FINAL_STATES = {succeeded = true, failed = true, blocked = true, cancelled = true,
                      skipped = true, replaced = true}

-- Forget the stopped nodes of a run that stays open for its teardown (`stopped`: {node,
-- state it had}): nothing of theirs stays due, the run's counters lose them.
local function forget_stopped(stopped)
  for _, item in ipairs(stopped) do
    local node, was = item[1], item[2]
    for _, key in ipairs({K.queued, K.outbox, K.leases, K.retry}) do redis.call('ZREM', key, node) end
    local dispatch = redis.call('HGET', K.dispatch, node)
    pool_remove(pool_member(decoded(dispatch).queue, pool_rank(dispatch), node))
    redis.call('HDEL', K.holder, node)
    if was == 'running' or was == 'waiting_approval' then redis.call('HINCRBY', K.run, was, -1) end
  end
end

-- Stop the run's work (a cancel, or its run timeout): every node not yet final becomes
-- CANCELLED and nothing stays due, but for the nodes `spared` names (a set: the teardown
-- nodes, see stop_run). Returns the nodes that were running (their workers are told to
-- stop), the queued ones as {node, fence, dispatch} (their messages revoked) and the
-- stopped ones as {node, state it had}.
local function stop_open_nodes(spared)
  local running, queued, stopped = {}, {}, {}
  local states = redis.call('HGETALL', K.state)
  for i = 1, #states, 2 do
    local node, state = states[i], states[i + 1]
    if not FINAL_STATES[state] and not (spared and spared[node]) then
      if state == 'running' then running[#running + 1] = node end
      if state == 'queued' then
        queued[#queued + 1] = {node, redis.call('HGET', K.fence, node), redis.call('HGET', K.dispatch, node)}
      end
      set_final(node, 'cancelled')
      emit('node.cancelled', node, 'was', state)
      stopped[#stopped + 1] = {node, state}
    end
  end
  if spared then
    forget_stopped(stopped)
    return running, queued, stopped
  end
  pool_clear()
  settling_clear()
  for _, key in ipairs({K.queued, K.outbox, K.leases, K.retry, K.holder}) do
    redis.call('DEL', key)
  end
  redis.call('HSET', K.run, 'running', 0, 'waiting_approval', 0)
  return running, queued, stopped
end

-- ---- Teardown (run_if: always) -------------------------------------------------------
-- A teardown node runs as all_done does, and after a stop too. A stop (cancel.lua, a run
-- timeout in reconcile.lua) of a run with teardown nodes not yet final stops the others
-- (stop_open_nodes), counts them as done for their dependents (so a teardown node whose
-- dependencies are all final is queued: its envelopes say `cancelled`) and leaves the run
-- open (status unchanged) with `stopping` = the status it ends as (finalize_if_done) and
-- `teardown_deadline` (epoch ms: `teardown_timeout_ms`, recorded at submit, from now),
-- past which reconcile.lua cancels what is left. Only teardown nodes are left to claim.

local TEARDOWN_TIMEOUT_MS = 300000  -- runs written before teardown_timeout_ms was

local function open_teardown_nodes()
  local found, count = {}, 0
  if not run_has_rules() then return found, count end
  local rules = redis.call('HGETALL', K.run_if)
  for i = 1, #rules, 2 do
    if rules[i + 1] == 'always' and not FINAL_STATES[redis.call('HGET', K.state, rules[i])] then
      found[rules[i]] = true
      count = count + 1
    end
  end
  return found, count
end

-- Stop the run, as `ends_as` ('cancelled' or 'failed') for `reason`. Returns the running
-- and queued nodes to stop and revoke, the teardown nodes it queued ({node, fence,
-- dispatch}, to publish) and whether the run stays open for its teardown.
local function stop_run(ends_as, reason)
  local spared, count = open_teardown_nodes()
  redis.call('HSET', K.run, 'stop_reason', reason)
  if count == 0 then
    local running, queued = stop_open_nodes()
    return running, queued, {}, false
  end
  local running, queued, stopped = stop_open_nodes(spared)
  local ready = {}
  for _, item in ipairs(stopped) do settle_dependents(item[1], 'cancelled', ready) end
  local timeout_ms = tonumber(redis.call('HGET', K.run, 'teardown_timeout_ms') or TEARDOWN_TIMEOUT_MS)
  redis.call('HSET', K.run, 'stopping', ends_as, 'teardown_deadline', NOW + timeout_ms)
  emit('run.tearing_down', false, 'nodes', count, 'deadline_ms', timeout_ms)
  return running, queued, ready, true
end

-- A stopping run past its teardown deadline: cancel what is left and end it. Returns
-- the running and queued nodes to stop and revoke, or nil if its time is not up.
local function end_teardown_if_due(run_stopping, deadline)
  if NOW < tonumber(deadline) then return nil end
  local running, queued = stop_open_nodes()
  emit('run.teardown_timed_out', false)
  finish_run(run_stopping)
  return {running, queued}
end
-- ---- end of Teardown ------------------------------------------------------------------

-- The outputs of `deps` as {dep1, out1, ...} (claim_inputs: once per call for one deps text).
local function inputs_of(deps_text, deps)
  local inputs = claim_inputs[deps_text]
  if inputs then return inputs end
  inputs = {}
  for _, chunk in ipairs(chunks(deps)) do
    local outputs = redis.call('HMGET', K.output, unpack(chunk))
    for i = 1, #chunk do
      inputs[#inputs + 1] = chunk[i]
      inputs[#inputs + 1] = outputs[i]
    end
  end
  claim_inputs[deps_text] = inputs
  return inputs
end

-- A handler's (a node with a run_if rule) view of its dependencies: {dep1, state1, ...}
-- and {dep, error JSON, ...} of those that failed.
local function dependency_outcomes(deps)
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
  return outcomes, errors
end

-- Claim queued `nodes` for `holder` with a lease of `lease_ms`: claim.lua's step once it
-- has checked the message's fence (one node), and complete.lua's for the nodes its worker
-- runs next (a batch: one command of each kind for them all, decision 124), which passes
-- each row's mark in `marks` (queue_node: 'new' was never queued, 'pooled' is in the
-- queued set only). The run's running count is left to the caller. Returns claim.lua's
-- 'ok' reply of each.
local function claim_all(nodes, marks, lease_ms, holder)
  local due, leases, queued, outbox = NOW + tonumber(lease_ms), {}, {}, {}
  for i, node in ipairs(nodes) do
    leases[#leases + 1] = due
    leases[#leases + 1] = node
    if marks[i] ~= 'new' then queued[#queued + 1] = node end
    if marks[i] == nil then outbox[#outbox + 1] = node end
  end
  redis.call('HSET', K.state, unpack(node_pairs(nodes, 'running')))
  redis.call('HSET', K.holder, unpack(node_pairs(nodes, holder)))
  redis.call('HSET', K.started, unpack(node_pairs(nodes, NOW)))
  if #queued > 0 then redis.call('ZREM', K.queued, unpack(queued)) end
  if #outbox > 0 then redis.call('ZREM', K.outbox, unpack(outbox)) end
  redis.call('ZADD', K.leases, unpack(leases))
  local specs = redis.call('HMGET', K.spec, unpack(nodes))
  local deps_texts = redis.call('HMGET', K.deps, unpack(nodes))
  local checkpoints = redis.call('HMGET', K.checkpoint, unpack(nodes))
  local deaths = redis.call('HMGET', K.deaths, unpack(nodes))
  local losses = redis.call('HMGET', K.losses, unpack(nodes))
  if run_claim_fields == nil then read_run_flags() end
  local run = run_claim_fields
  local replies = {}
  for i, node in ipairs(nodes) do
    local attempt = redis.call('HINCRBY', K.attempts, node, 1)
    emit('node.running', node, 'attempt', attempt, 'holder', holder)
    local deps = decoded(deps_texts[i])
    local reply = {'status', 'ok', 'spec', specs[i], 'attempt', attempt,
            'checkpoint', checkpoints[i] or '', 'deaths', deaths[i] or 0, 'losses', losses[i] or 0,
            'max_concurrent_nodes', run[1] or '', 'response_cache', run[2] or '',
            'llm_batch', run[3] or '', 'run_inputs', run[4] or '',
            'inputs', inputs_of(deps_texts[i], deps)}
    if run_has_rules() and redis.call('HEXISTS', K.run_if, node) == 1 then
      local outcomes, errors = dependency_outcomes(deps)
      for _, value in ipairs({'outcomes', outcomes, 'errors', errors}) do
        reply[#reply + 1] = value
      end
    end
    replies[i] = reply
  end
  return replies
end

-- claim_all of one node, counted in the run's running nodes (claim.lua).
local function claim_queued(node, lease_ms, holder)
  redis.call('HINCRBY', K.run, 'running', 1)
  return claim_all({node}, {}, lease_ms, holder)[1]
end

-- Whether `node`, pending, may be run ahead of its dependency's recorded success
-- (decision 128): no run_if rule (a handler sees its dependencies' outcomes) nor countdown
-- (it waits), the only ones complete.lua could not decide without that success.
local function runs_plainly(node)
  if countdowns_in_run == nil then read_run_flags() end
  if rules_in_run and redis.call('HEXISTS', K.run_if, node) == 1 then return false end
  return not (countdowns_in_run and redis.call('HEXISTS', K.countdown, node) == 1)
end

-- The only element of a JSON list's text, or nil.
local function only_one(text)
  local list = text and decoded(text)
  return list and #list == 1 and list[1] or nil
end

-- The chain after `node`, claimed for a worker with room for `count` more nodes (decision
-- 128): its only dependent, if that one depends on it alone, is pending, runs plainly and
-- fits the worker (one of the `wanted` queues, a time limit within `max_limit_ms`), then
-- that one's, up to `count` links of {node, spec, dispatch, attempt}. The worker runs
-- them one after another, each before the success of the one before is recorded, and
-- records them together: one step for a chain's `count` + 1 nodes. Nothing is written:
-- complete.lua checks each link again when it records it.
local function chain_links(node, wanted, max_limit_ms, count)
  local links = {}
  while #links < count do
    local child = only_one(redis.call('HGET', K.dependents, node))
    if not child or redis.call('HGET', K.state, child) ~= 'pending' then break end
    if only_one(redis.call('HGET', K.deps, child)) ~= node or not runs_plainly(child) then break end
    local dispatch = redis.call('HGET', K.dispatch, child)
    local fields = decoded(dispatch)
    if not wanted[fields.queue] or tonumber(fields.time_limit_s) * 1000 > max_limit_ms then break end
    local attempts = tonumber(redis.call('HGET', K.attempts, child) or 0)
    links[#links + 1] = {child, redis.call('HGET', K.spec, child), dispatch, attempts + 1}
    node = child
  end
  return links
end

-- complete.lua for a worker that runs on (execution/eager.py): the first `want` nodes of
-- `ready` on one of `queues` whose time limits fit in `max_limit_ms` leave `ready`, claimed
-- for `holder` in this step, which saves the worker a claim of its own (one round trip
-- and one script a node). The run's running count is left to the caller (complete.lua).
-- Returns a list of {row, claim reply}, empty when no node fits; with `links` (the worker
-- runs chains ahead), a node claimed alone has the chain after it in its reply's 'ahead'.
-- The run is open: the step recorded a node that was running, and a run ends only once
-- every node is final (finalize_if_done comes after), so its status is not read again.
local function claim_kept(ready, queues, max_limit_ms, lease_ms, holder, want, links)
  local wanted = set_of(queues)
  local chosen, left = {}, {}
  for _, item in ipairs(ready) do
    local dispatch = decoded(item[3])
    if #chosen < want and wanted[dispatch.queue] and tonumber(dispatch.time_limit_s) * 1000 <= max_limit_ms then
      chosen[#chosen + 1] = item
    else
      left[#left + 1] = item
    end
  end
  for i = 1, math.max(#ready, #left) do ready[i] = left[i] end
  if #chosen == 0 then return {} end
  local nodes, marks = {}, {}
  for i, item in ipairs(chosen) do
    nodes[i], marks[i], item[4] = item[1], item[4], nil
  end
  local kept = {}
  for i, reply in ipairs(claim_all(nodes, marks, lease_ms, holder)) do kept[i] = {chosen[i], reply} end
  if links and #nodes == 1 and want > 1 then
    -- one node where the worker had room for more: a chain's, whose next links it may
    -- run before this one's success is recorded (decision 128)
    local reply = kept[1][2]
    local found = chain_links(nodes[1], wanted, max_limit_ms, want - 1)
    if #found > 0 then
      reply[#reply + 1] = 'ahead'
      reply[#reply + 1] = found
    end
  end
  return kept
end

-- Finish the run once every node is final; returns the run's final status or ''. A run
-- stopping for its teardown ends as its stop said.
local function finalize_if_done()
  local run = redis.call('HMGET', K.run, 'status', 'total', 'done', 'failed', 'blocked',
                         'stopping', 'running')
  run_running = tonumber(run[7])
  if not is_open(run[1]) or tonumber(run[3]) < tonumber(run[2]) then return '' end
  if run[6] then return finish_run(run[6]) end
  if tonumber(run[4]) > 0 or tonumber(run[5]) > 0 then return finish_run('failed') end
  return finish_run('succeeded')
end
