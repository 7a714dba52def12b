-- Leave queued nodes unpublished, for the workers of their queue to pull (pull_from_pool;
-- execution/pool.py): out of the outbox, into the run's pool. A node no longer queued, or
-- no longer in the outbox (its message went out), is left as it is.
-- ARGV[3..] triples: queue, rank (the prelude's pool_rank), node.
-- Returns {'status', 'ok', 'pooled', n} or {'status', 'stale'}.
if not is_open(run_status()) then return {'status', 'stale'} end
local pooled, added = 0, {}
for i = 3, #ARGV, 3 do
  local queue, rank, node = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('HGET', K.state, node) == 'queued' and redis.call('ZREM', K.outbox, node) == 1 then
    pool_add(queue, rank, node, added)
    pooled = pooled + 1
  end
end
count_tallied(added)
redis.call('HSET', K.run, 'pool_pulled_at', NOW)
return {'status', 'ok', 'pooled', pooled}
