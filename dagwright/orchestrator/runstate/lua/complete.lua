-- Record the success of one node, or of a batch of a run's nodes that one worker ran, and
-- advance the run: O(out-degree of each node), never a scan (its dependents are decided
-- by their run_if rules, see settle_dependents).
-- ARGV[3] n, the successes recorded; then n groups of six: node, fence, output JSON, the
-- node-duration counter's bucket field ('' counts nothing), its sum field, the attempt's
-- whole microseconds (HINCRBY: a tenth of an HINCRBYFLOAT's Valkey CPU). SHARED[1] is the
-- node-duration counters hash (see telemetry/counters.py). Counted here, the metric costs
-- no round trip of its own; on a Cluster, where that hash is in another slot, the caller
-- counts after this step.
-- After them (ARGV[at..], at = 4 + 6n): the holder of a worker that runs on ('' for
-- none), its lease in ms, the longest time limit in ms of a node it may keep (prelude.lua
-- claim_kept), how many nodes it takes (`want`), then the queues the worker pulls from:
-- with no node of them readied, it takes `want` (with no holder, one) from the run's pool
-- (pull_from_pool), appended to ready; with a holder, the first `want` nodes of them
-- that fit are claimed for it in this step and returned apart.
-- Their dependents are counted SETTLE_CHUNK at a time (prelude.lua settle_dependents):
-- past that, 'settling' is 1 and the caller releases the rest with settle.lua.
-- Returns {'status', 'ok', 'run_finished', final run status or '', 'ready',
-- {{node, fence, dispatch}...}, 'running', the run's nodes running now (on other
-- workers: execution/fairness.py), 'settling', 1 or 0, 'stale', {node...} (those of the
-- batch no longer this worker's: nothing recorded), 'claimed', {{{node, fence, dispatch},
-- claim.lua's reply}...}} or, when none of them was the worker's, {'status', 'stale'}.
-- With a holder, the nodes readied here are queued once the kept ones are chosen
-- (prelude.lua queue_node: a kept node never goes through QUEUED), and the run's running
-- count changes once, at the end.
local count = tonumber(ARGV[3])
local at = 4 + 6 * count
local holder, lease_ms, max_limit_ms, want = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
local queues = {unpack(ARGV, at + 4)}
local ready, stale, metric = {}, {}, {}
settle_budget = SETTLE_CHUNK
defer_queueing = #queues > 0 and holder ~= ''
-- the batch's nodes are checked, released and made final one command of each kind for
-- them all (decision 124); their dependents are settled one node after another
local nodes, seen, done, outputs = {}, {}, {}, {}
for first = 4, at - 1, 6 do nodes[#nodes + 1] = ARGV[first] end
local states = redis.call('HMGET', K.state, unpack(nodes))
local fences = redis.call('HMGET', K.fence, unpack(nodes))
for i, node in ipairs(nodes) do
  local first = 4 + 6 * (i - 1)
  if states[i] == 'running' and fences[i] == ARGV[first + 1] and not seen[node] then
    seen[node] = true
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
release_all(done)
forget_deaths_of(done)
redis.call('HSET', K.output, unpack(outputs))
set_all_final(done, 'succeeded')
for _, node in ipairs(done) do
  emit('node.succeeded', node)
  settle_dependents(node, 'succeeded', ready)
end
local own_left = settling_left  -- a chunk a pull releases below goes to the pool itself
local kept = {}
if #queues > 0 then
  -- a chain's next node is enough: topping it up from an empty pool costs every node of
  -- a chain three calls (pull_from_pool, refill_pool)
  if not readies_one_of(ready, queues) then pull_from_pool(queues, ready, holder ~= '' and want or 1) end
  if holder ~= '' then kept = claim_kept(ready, queues, max_limit_ms, lease_ms, holder, want) end
end
queue_deferred(ready)
for field, delta in pairs(metric) do
  -- pcall: a metric must never fail the work it counts (the nodes are recorded by now).
  redis.pcall('HINCRBY', SHARED[1], field, delta)
end
local finished = finalize_if_done()
local counted = #kept - #done
local running = counted == 0 and run_running or redis.call('HINCRBY', K.run, 'running', counted)
return {'status', 'ok', 'run_finished', finished, 'ready', ready, 'running', running,
        'settling', own_left and 1 or 0, 'stale', stale, 'claimed', kept}
