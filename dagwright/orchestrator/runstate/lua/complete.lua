-- Record a node's success and advance the run: O(out-degree of the node), never a scan
-- (its dependents are decided by their run_if rules, see settle_dependents).
-- ARGV[3] node, ARGV[4] fence, ARGV[5] output JSON.
-- ARGV[6] the node-duration counter's bucket field ('' counts nothing), ARGV[7] its sum
-- field, ARGV[8] the attempt's whole microseconds (HINCRBY: a tenth of an HINCRBYFLOAT's
-- Valkey CPU); SHARED[1] the node-duration counters hash (see telemetry/counters.py). Counted here, the metric costs no round trip of its own; on a
-- Cluster, where that hash is in another slot, the caller counts after this step.
-- ARGV[9..] the queues the worker pulls from: with no node of them readied, it takes one
-- from the run's pool (pull_from_pool), appended to ready.
-- Its dependents are counted SETTLE_CHUNK at a time (prelude.lua settle_dependents): past
-- that, 'settling' is 1 and the caller releases the rest with settle.lua.
-- Returns {'status', 'ok', 'run_finished', final run status or '', 'ready',
-- {{node, fence, dispatch}...}, 'running', the run's nodes running now (on other
-- workers: execution/fairness.py), 'settling', 1 or 0} or {'status', 'stale'}.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'status', 'stale'} end
release(node)
forget_deaths(node)
redis.call('HSET', K.output, node, ARGV[5])
set_final(node, 'succeeded')
emit('node.succeeded', node)
local ready = {}
settle_budget = SETTLE_CHUNK
settle_dependents(node, 'succeeded', ready)
local own_left = settling_left  -- a chunk a pull releases below goes to the pool itself
if #ARGV >= 9 then
  local queues = {unpack(ARGV, 9)}
  if not readies_one_of(ready, queues) then pull_from_pool(queues, ready) end
end
if ARGV[6] ~= '' then
  -- pcall: a metric must never fail the work it counts (the node is recorded by now).
  redis.pcall('HINCRBY', SHARED[1], ARGV[6], 1)
  redis.pcall('HINCRBY', SHARED[1], ARGV[7], ARGV[8])
end
return {'status', 'ok', 'run_finished', finalize_if_done(), 'ready', ready,
        'running', redis.call('HGET', K.run, 'running'), 'settling', own_left and 1 or 0}
