-- Record a person's (or the timeout's) decision on a waiting node and queue it again:
-- its worker resumes from its checkpoint and acts on the decision.
-- ARGV[3] node, ARGV[4] approval id, ARGV[5] decision JSON, ARGV[6] 'approved' or
-- 'rejected', ARGV[7] member of the pending index, then audit entry fields.
-- Returns {'status', 'ok', 'ready', ready} or {'status', 'stale', 'why', why, 'unindex',
-- 0/1}: the caller then drops ARGV[7] from the pending-approvals index (another Cluster
-- slot), a stale request's too, unless its node runs now (it may be about to wait again,
-- its entry written before await_approval.lua).
local node, approval_id = ARGV[3], ARGV[4]
local function stale(why)
  local running = redis.call('HGET', K.state, node) == 'running'
  return {'status', 'stale', 'why', why, 'unindex', running and 0 or 1}
end
if not is_open(run_status()) then return stale('the run is ' .. tostring(run_status())) end
if redis.call('HGET', K.state, node) ~= 'waiting_approval' then
  return stale('the node is ' .. tostring(redis.call('HGET', K.state, node)))
end
local request = redis.call('HGET', K.approvals, 'request:' .. node)
if not request or cjson.decode(request).id ~= approval_id then
  return stale('the node waits for another approval')
end
redis.call('HSET', K.approvals, 'decision:' .. node, ARGV[5])
redis.call('HINCRBY', K.run, 'waiting_approval', -1)
local audit = {}
for i = 8, #ARGV do audit[#audit + 1] = ARGV[i] end
redis.call('XADD', K.audit, 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(audit))
emit('node.' .. ARGV[6], node)
local ready = {}
queue_node(node, ready)
return {'status', 'ok', 'ready', ready}
