-- Record a node's success and advance the run: O(out-degree of the node), never a scan
-- (its dependents are decided by their run_if rules, see settle_dependents).
-- ARGV[3] node, ARGV[4] fence, ARGV[5] output JSON.
-- ARGV[6] the node-duration counter's bucket field ('' counts nothing), ARGV[7] its sum
-- field, ARGV[8] the attempt's whole microseconds (HINCRBY: a tenth of an HINCRBYFLOAT's
-- Valkey CPU); SHARED[1] the node-duration counters hash (see telemetry/counters.py). Counted here, the metric costs no round trip of its own; on a
-- Cluster, where that hash is in another slot, the caller counts after this step.
-- ARGV[9] the holder of a worker that runs on ('' for none), ARGV[10] its lease in ms,
-- ARGV[11] the longest time limit in ms of a node it may keep (prelude.lua claim_kept).
-- ARGV[12..] the queues the worker pulls from: with no node of them readied, it takes one
-- from the run's pool (pull_from_pool), appended to ready; with a holder, the first
-- node of them that fits is claimed for it in this step and returned apart.
-- Its dependents are counted SETTLE_CHUNK at a time (prelude.lua settle_dependents): past
-- that, 'settling' is 1 and the caller releases the rest with settle.lua.
-- Returns {'status', 'ok', 'run_finished', final run status or '', 'ready',
-- {{node, fence, dispatch}...}, 'running', the run's nodes running now (on other
-- workers: execution/fairness.py), 'settling', 1 or 0[, 'claimed', {node, fence,
-- dispatch}, 'claim', claim.lua's reply]} or {'status', 'stale'}.
-- With a holder, the nodes readied here are queued once the kept one is chosen (prelude.lua
-- queue_node: the kept node never goes through QUEUED), and the run's running count
-- changes once, at the end: by 0 when a kept node runs on in the finished one's place.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'status', 'stale'} end
release(node, true)
forget_deaths(node)
redis.call('HSET', K.output, node, ARGV[5])
set_final(node, 'succeeded')
emit('node.succeeded', node)
local ready = {}
settle_budget = SETTLE_CHUNK
defer_queueing = #ARGV >= 12 and ARGV[9] ~= ''
settle_dependents(node, 'succeeded', ready)
local own_left = settling_left  -- a chunk a pull releases below goes to the pool itself
local kept
if #ARGV >= 12 then
  local queues = {unpack(ARGV, 12)}
  if not readies_one_of(ready, queues) then pull_from_pool(queues, ready) end
  if ARGV[9] ~= '' then kept = claim_kept(ready, queues, tonumber(ARGV[11]), ARGV[10], ARGV[9]) end
end
queue_deferred(ready)
if ARGV[6] ~= '' then
  -- pcall: a metric must never fail the work it counts (the node is recorded by now).
  redis.pcall('HINCRBY', SHARED[1], ARGV[6], 1)
  redis.pcall('HINCRBY', SHARED[1], ARGV[7], ARGV[8])
end
local reply = {'status', 'ok', 'run_finished', finalize_if_done(), 'ready', ready,
        'running', redis.call('HINCRBY', K.run, 'running', kept and 0 or -1),
        'settling', own_left and 1 or 0}
if kept then
  for _, value in ipairs({'claimed', kept[1], 'claim', kept[2]}) do reply[#reply + 1] = value end
end
return reply
