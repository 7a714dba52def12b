-- Park a failed node until its retry is due; the reconciler queues it again then.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] error JSON, ARGV[6] delay ms.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'stale'} end
release(node)
redis.call('HSET', K.error, node, ARGV[5])
redis.call('HSET', K.state, node, 'retry_wait')
redis.call('ZADD', K.retry, NOW + tonumber(ARGV[6]), node)
emit('node.retrying', node, 'delay_ms', ARGV[6])
return {'ok'}
