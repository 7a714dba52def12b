-- Park a failed node until its retry is due; the reconciler queues it again then.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] error JSON, ARGV[6] delay ms, ARGV[7] the circuit
-- breaker that refused the call ('' if none). Waiting out an open breaker is not a failed
-- attempt of the node: its attempt is given back, and it is not a first failure either.
local node, fence, breaker = ARGV[3], ARGV[4], ARGV[7]
if not owns(node, fence, 'running') then return {'status', 'stale'} end
release(node)
redis.call('HDEL', K.deliveries, node)
redis.call('HSET', K.error, node, ARGV[5])
redis.call('HSET', K.state, node, 'retry_wait')
redis.call('ZADD', K.retry, NOW + tonumber(ARGV[6]), node)
if breaker ~= '' then
  redis.call('HINCRBY', K.attempts, node, -1)
  emit('node.waiting', node, 'breaker', breaker, 'delay_ms', ARGV[6])
else
  redis.call('HSETNX', K.first_failure, node, NOW)
  -- The error's class goes into the event too: the trace's retry spans show it, and the
  -- error hash keeps only the node's latest failure.
  local error_class = cjson.decode(ARGV[5]).error_class
  if type(error_class) ~= 'string' then error_class = '' end
  emit('node.retrying', node, 'delay_ms', ARGV[6], 'error_class', error_class)
end
return {'status', 'ok'}
