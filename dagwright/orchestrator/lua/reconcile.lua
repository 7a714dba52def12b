-- One reconciler pass over one run. Re-queues nodes whose lease expired or whose retry
-- is due, and lists queued nodes to publish again: those whose publish was never
-- confirmed after ARGV[3] ms, and those not claimed after ARGV[4] ms (the caller
-- republishes these only if their queue is empty: the message was lost with a broker or
-- a dead worker's prefetch). At most ARGV[5] nodes of each kind per pass.
-- Returns {run_status, requeued, unpublished, stranded}, lists of {node, fence, dispatch}.
local status = run_status()
if not status then return {'missing', {}, {}, {}} end
if status ~= 'running' then return {status, {}, {}, {}} end
local limit = ARGV[5]
local requeued = {}
for _, node in ipairs(redis.call('ZRANGEBYSCORE', K.leases, '-inf', NOW, 'LIMIT', 0, limit)) do
  local holder = redis.call('HGET', K.holder, node) or ''
  release(node)
  emit('node.lease_expired', node, 'holder', holder)
  queue_node(node, requeued)
end
for _, node in ipairs(redis.call('ZRANGEBYSCORE', K.retry, '-inf', NOW, 'LIMIT', 0, limit)) do
  redis.call('ZREM', K.retry, node)
  queue_node(node, requeued)
end

-- Entries older than the cutoff, re-stamped so the next pass does not list them again.
local function overdue(key, age_ms, skip_key)
  local found = {}
  for _, node in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', NOW - tonumber(age_ms), 'LIMIT', 0, limit)) do
    redis.call('ZADD', key, NOW, node)
    if not (skip_key and redis.call('ZSCORE', skip_key, node)) then
      found[#found + 1] = {node, redis.call('HGET', K.fence, node), redis.call('HGET', K.dispatch, node)}
    end
  end
  return found
end

local unpublished = overdue(K.outbox, ARGV[3], false)
local stranded = overdue(K.queued, ARGV[4], K.outbox)
return {status, requeued, unpublished, stranded}
