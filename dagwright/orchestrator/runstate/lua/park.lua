-- A claimed node that may not start yet (a concurrency limit is full; it now waits for a
-- slot) goes back to QUEUED under the same fence, its attempt given back.
-- Not in the outbox: the limit's waiters are published when a slot frees
-- (orchestrator/limits.py); its `queued` stamp is ARGV[6] ms ahead, so the reconciler's
-- stranded rule (a late safety net here) does not republish it again and again while
-- it waits. ARGV[3] node, ARGV[4] fence, ARGV[5] the limit it waits for. What it waits
-- on is kept in K.waits for `status` to show (since its first park of this wait: a woken
-- node that finds the limit full again keeps its place in time).
-- Returns {'owned', 1}, or {'owned', 0} if the node is no longer this claim's.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'owned', 0} end
release(node)
redis.call('HINCRBY', K.attempts, node, -1)
redis.call('HSET', K.state, node, 'queued')
redis.call('ZADD', K.queued, NOW + tonumber(ARGV[6]), node)
local since = NOW
local previous = redis.call('HGET', K.waits, node)
if previous then
  local wait = cjson.decode(previous)
  if wait.on == 'slot' and wait.name == ARGV[5] then since = wait.since_ms end
end
redis.call('HSET', K.waits, node, cjson.encode({on = 'slot', name = ARGV[5], since_ms = since}))
emit('node.parked', node, 'limit', ARGV[5])
return {'owned', 1}
