-- Record the success of one node, or of a batch of a run's nodes that one worker ran, and
-- advance the run: O(out-degree of each node), never a scan (its dependents are decided
-- by their run_if rules, see settle_dependents).
-- ARGV[3] n, the successes recorded; then n groups of six: node, fence, output JSON, the
-- node-duration counter's bucket field ('' counts nothing), its sum field, the attempt's
-- whole microseconds (HINCRBY: a tenth of an HINCRBYFLOAT's Valkey CPU). SHARED[1] is the
-- node-duration counters hash (see telemetry/counters.py). Counted here, the metric costs
-- no round trip of its own; on a Cluster, where that hash is in another slot, the caller
-- counts after this step.
-- A success under fence 0 ran ahead (decision 128): a chain's link (prelude.lua
-- chain_links), pending still, run by the worker before the success just before it in
-- the list, its only dependency, was recorded. It is recorded if that one is, in this
-- step, and the link still holds (pending, depending on that node alone, its only
-- dependent, runs plainly): as if claimed by the worker at once (its attempt counted,
-- 'node.running' written) and succeeded.
-- After them (ARGV[at..], at = 4 + 6n): the holder of the worker recording them ('' for
-- none), the lease in ms of a worker that runs on (0 for none), the longest time limit
-- in ms of a node it may keep (prelude.lua claim_kept), how many nodes it takes (`want`),
-- '1' if it runs a chain's links ahead (then a node claimed alone comes with them:
-- prelude.lua chain_links) else '0', then the queues the worker pulls from: with no node
-- of them readied, it takes `want` (with no lease, one) from the run's pool
-- (pull_from_pool), appended to ready; with a lease, the first `want` nodes of them that
-- fit are claimed for it in this step and returned apart.
-- Their dependents are counted SETTLE_CHUNK at a time (prelude.lua settle_dependents):
-- past that, 'settling' is 1 and the caller releases the rest with settle.lua.
-- Returns {'status', 'ok', 'run_finished', final run status or '', 'ready',
-- {{node, fence, dispatch}...}, 'running', the run's nodes running now (on other
-- workers: execution/fairness.py), 'settling', 1 or 0, 'stale', {node...} (those of the
-- batch no longer this worker's: nothing recorded), 'claimed', {{{node, fence, dispatch},
-- claim.lua's reply}...}} or, when none of them was the worker's, {'status', 'stale'}.
-- With a lease, the nodes readied here are queued once the kept ones are chosen
-- (prelude.lua queue_node: a kept node never goes through QUEUED), and the run's running
-- count changes once, at the end.
local count = tonumber(ARGV[3])
local at = 4 + 6 * count
local holder, lease_ms, max_limit_ms, want = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
local links = ARGV[at + 4] == '1'
local queues = {unpack(ARGV, at + 5)}
local runs_on = #queues > 0 and tonumber(lease_ms) > 0
local ready, stale, metric = {}, {}, {}
settle_budget = SETTLE_CHUNK
defer_queueing = runs_on
-- the batch's nodes are checked, released and made final one command of each kind for
-- them all (decision 124); their dependents are settled one node after another
local nodes, seen, done, outputs = {}, {}, {}, {}
for first = 4, at - 1, 6 do nodes[#nodes + 1] = ARGV[first] end
local states = redis.call('HMGET', K.state, unpack(nodes))
local fences = redis.call('HMGET', K.fence, unpack(nodes))
-- the links run ahead, by their index in nodes, and what recording them rests on
local ahead, ahead_nodes, parents = {}, {}, {}
for i = 2, #nodes do
  if ARGV[4 + 6 * (i - 1) + 1] == '0' then
    ahead_nodes[#ahead_nodes + 1], parents[#parents + 1] = nodes[i], nodes[i - 1]
    ahead[i] = #ahead_nodes
  end
end
local remaining, deps, parent_dependents
if #ahead_nodes > 0 then
  remaining = redis.call('HMGET', K.remaining, unpack(ahead_nodes))
  deps = redis.call('HMGET', K.deps, unpack(ahead_nodes))
  parent_dependents = redis.call('HMGET', K.dependents, unpack(parents))
end
local function still_linked(i, node)
  local j = ahead[i]
  return done[#done] == parents[j] and states[i] == 'pending' and remaining[j] == '1'
    and only_one(deps[j]) == parents[j] and only_one(parent_dependents[j]) == node
    and runs_plainly(node)
end
local ahead_done, after = {}, {}  -- after[node]: the link recorded next, which it readied
for i, node in ipairs(nodes) do
  local first = 4 + 6 * (i - 1)
  local recorded
  if ahead[i] then
    recorded = still_linked(i, node)
  else
    recorded = states[i] == 'running' and fences[i] == ARGV[first + 1]
  end
  if recorded and not seen[node] then
    seen[node] = true
    if ahead[i] then
      ahead_done[#ahead_done + 1] = node
      after[done[#done]] = node
    end
    done[#done + 1] = node
    outputs[#outputs + 1] = node
    outputs[#outputs + 1] = ARGV[first + 2]
    if ARGV[first + 3] ~= '' then
      metric[ARGV[first + 3]] = (metric[ARGV[first + 3]] or 0) + 1
      metric[ARGV[first + 4]] = (metric[ARGV[first + 4]] or 0) + tonumber(ARGV[first + 5])
    end
  else
    stale[#stale + 1] = node
  end
end
if #done == 0 then return {'status', 'stale'} end
local attempts, done_fenced = {}, done
if #ahead_done > 0 then
  -- as claimed at once: no release, deaths nor fence (it was never queued); its
  -- dependency's success is counted in it here, not by settle_dependents
  local before = redis.call('HMGET', K.attempts, unpack(ahead_done))
  local counted = {}
  for i, node in ipairs(ahead_done) do
    attempts[node] = tonumber(before[i] or 0) + 1
    counted[#counted + 1], counted[#counted + 2] = node, attempts[node]
  end
  redis.call('HSET', K.attempts, unpack(counted))
  redis.call('HSET', K.remaining, unpack(node_pairs(ahead_done, 0)))
  redis.call('HSET', K.started, unpack(node_pairs(ahead_done, NOW)))
  done_fenced = {}
  for _, node in ipairs(done) do
    if not attempts[node] then done_fenced[#done_fenced + 1] = node end
  end
end
release_all(done_fenced)
forget_deaths_of(done_fenced)
redis.call('HSET', K.output, unpack(outputs))
set_all_final(done, 'succeeded')
for _, node in ipairs(done) do
  if attempts[node] then
    emit('node.running', node, 'attempt', attempts[node], 'holder', holder, 'ahead', 1)
  end
  emit('node.succeeded', node)
  if not after[node] then settle_dependents(node, 'succeeded', ready) end
end
local own_left = settling_left  -- a chunk a pull releases below goes to the pool itself
local kept = {}
if #queues > 0 then
  -- a chain's next node is enough: topping it up from an empty pool costs every node of
  -- a chain three calls (pull_from_pool, refill_pool)
  if not readies_one_of(ready, queues) then pull_from_pool(queues, ready, runs_on and want or 1) end
  if runs_on then kept = claim_kept(ready, queues, max_limit_ms, lease_ms, holder, want, links) end
end
queue_deferred(ready)
for field, delta in pairs(metric) do
  -- pcall: a metric must never fail the work it counts (the nodes are recorded by now).
  redis.pcall('HINCRBY', SHARED[1], field, delta)
end
local finished = finalize_if_done()
local counted = #kept - (#done - #ahead_done)  -- a link run ahead was never counted
local running = counted == 0 and run_running or redis.call('HINCRBY', K.run, 'running', counted)
return {'status', 'ok', 'run_finished', finished, 'ready', ready, 'running', running,
        'settling', own_left and 1 or 0, 'stale', stale, 'claimed', kept}
