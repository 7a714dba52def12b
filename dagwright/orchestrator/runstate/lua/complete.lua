-- Record a node's success and advance the run: O(out-degree of the node), never a scan
-- (its dependents are decided by their run_if rules, see settle_dependents).
-- ARGV[3] node, ARGV[4] fence, ARGV[5] output JSON.
-- The attempt's duration is counted by the caller after this step (the counters are in
-- another Cluster slot). ARGV[6..] the queues the worker pulls from: with no node of them readied, it takes one
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
if #ARGV >= 6 then
  local queues = {unpack(ARGV, 6)}
  if not readies_one_of(ready, queues) then pull_from_pool(queues, ready) end
end
return {'status', 'ok', 'run_finished', finalize_if_done(), 'ready', ready,
        'running', redis.call('HGET', K.run, 'running'), 'settling', own_left and 1 or 0}
