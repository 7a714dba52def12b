-- A running node waits for a person: RUNNING -> WAITING_APPROVAL, its lease and worker
-- slot given up. ARGV[3] node, ARGV[4] fence, ARGV[5] request JSON, ARGV[6] deadline ms,
-- ARGV[7] member of the pending index, then audit entry fields (name, value, ...).
-- The caller adds ARGV[7] to the pending-approvals index before this step (another
-- Cluster slot). Waiting is not a failed attempt: the attempt
-- is given back, and the claim that resumes the node counts a new one.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'status', 'stale'} end
release(node)
forget_deaths(node)
redis.call('HINCRBY', K.attempts, node, -1)
redis.call('HSET', K.state, node, 'waiting_approval')
redis.call('HINCRBY', K.run, 'waiting_approval', 1)
redis.call('HSET', K.approvals, 'request:' .. node, ARGV[5])
redis.call('HDEL', K.approvals, 'decision:' .. node)
local audit = {}
for i = 8, #ARGV do audit[#audit + 1] = ARGV[i] end
redis.call('XADD', K.audit, 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(audit))
emit('node.waiting_approval', node)
return {'status', 'ok'}
