-- Park a failed node until its retry is due; the reconciler queues it again then.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] error JSON, ARGV[6] delay ms, ARGV[7] what the node
-- waits on ('' if it is a plain retry): the circuit breaker that refused the call, or the
-- Message Batch its call waits in, ARGV[8] the failure that opened the breaker, ARGV[9]
-- the longest a node may wait on such things (ms), ARGV[10] the kind of wait ('breaker',
-- 'batch' or 'celery_task': the team Celery task a celery_task node sent). Such a wait
-- is not a failed attempt of the node: its attempt is given back, and it is not a first
-- failure either. But it is bounded: parked on the same kind of
-- thing again and again for ARGV[9] in all (a wait that ended longer ago than that starts
-- afresh), the node is not parked but left running and {'status', 'expired'} returned, for
-- the caller to fail it (fail.lua). What the node waits on is kept in K.waits for
-- `status` to show.
local node, fence, breaker, kind = ARGV[3], ARGV[4], ARGV[7], ARGV[10]
if not owns(node, fence, 'running') then return {'status', 'stale'} end
local delay_ms = tonumber(ARGV[6])

-- When this node's current run of breaker waits began (NOW if it begins now).
local function waiting_since(max_wait_ms)
  local previous = redis.call('HGET', K.waits, node)
  if not previous then return NOW end
  local wait = cjson.decode(previous)
  if wait.on ~= kind or NOW - wait.until_ms > max_wait_ms then return NOW end
  -- A batch's (or a team Celery task's) wait is its own: the next one starts afresh.
  if kind ~= 'breaker' and wait.name ~= breaker then return NOW end
  return wait.since_ms
end

if breaker ~= '' then
  local max_wait_ms = tonumber(ARGV[9])
  local since = waiting_since(max_wait_ms)
  if NOW - since >= max_wait_ms then
    redis.call('HDEL', K.waits, node)
    return {'status', 'expired', 'since_ms', since}
  end
  redis.call('HSET', K.waits, node, cjson.encode({
    on = kind, name = breaker, since_ms = since, until_ms = NOW + delay_ms,
    last_failure = ARGV[8]}))
else
  redis.call('HDEL', K.waits, node)
end

-- A call waiting in a batch was sent: its worst case stays held against the run's budget
-- (reserve.lua), or other nodes could spend it while the batch processes.
local held = kind == 'batch' and redis.call('HGET', K.reserved, node)
release(node)
if held then redis.call('HSET', K.reserved, node, held) end
forget_deaths(node)
redis.call('HSET', K.error, node, ARGV[5])
redis.call('HSET', K.state, node, 'retry_wait')
redis.call('ZADD', K.retry, NOW + delay_ms, node)
if breaker ~= '' then
  redis.call('HINCRBY', K.attempts, node, -1)
  emit('node.waiting', node, kind, breaker, 'delay_ms', ARGV[6])
else
  redis.call('HSETNX', K.first_failure, node, NOW)
  -- The error's class goes into the event too: the trace's retry spans show it, and the
  -- error hash keeps only the node's latest failure.
  local error_class = cjson.decode(ARGV[5]).error_class
  if type(error_class) ~= 'string' then error_class = '' end
  emit('node.retrying', node, 'delay_ms', ARGV[6], 'error_class', error_class)
end
return {'status', 'ok'}
