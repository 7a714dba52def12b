-- One reconciler pass over one run. Re-queues nodes whose lease expired or whose retry
-- is due, and lists queued nodes to publish again: those whose publish was never
-- confirmed after ARGV[3] ms, and "stranded" ones: not claimed after ARGV[4] ms although
-- their queue is empty (their message was lost with a broker or in a dead worker's
-- prefetch). ARGV[10..] name the queues that are empty now; with none, no queued node is
-- looked at for that, so a long backlog costs nothing. At most ARGV[5] nodes of each kind
-- per pass. ARGV[6], ARGV[7]: priority aging (aged, below). ARGV[8], ARGV[9]: the backoff
-- of a node whose worker was lost (lost_worker, below), base and cap in ms; ARGV[10..] the
-- empty queues.
-- A pool left idle for ARGV[3] ms is published too (from_idle_pool), with the unpublished.
-- Returns {'status', run status, 'requeued', ..., 'unpublished', ..., 'stranded', ...,
-- 'aged', ..., 'gated', 1 if the run waits for its concurrency key else 0, 'age_ms', ms
-- since it was created or last re-opened}, lists of
-- {node, fence, dispatch}; a delayed node (its countdown, the run's not_before) is
-- released with the due retries. A run past its run timeout (`timeout_ms` after
-- `created_at`) is stopped instead: its open nodes are cancelled and it fails; then
-- {'status', 'failed', 'timed_out_running', running nodes, 'timed_out_queued',
-- {node, fence, dispatch}...}, for the caller to stop and revoke.
local status = run_status()
if not status then return {'status', 'missing'} end
if not is_open(status) then return {'status', status} end
-- A run kept open for its teardown (prelude: Teardown) is not timed out again; past its
-- teardown deadline it ends, as a timed-out run does. A timeout that leaves a run open
-- for its teardown returns its status with 'teardown', the teardown nodes it queued.
local run = redis.call('HMGET', K.run, 'timeout_ms', 'created_at', 'stopping', 'teardown_deadline',
                      'reopened_at')
if run[3] then
  local ended = end_teardown_if_due(run[3], run[4])
  if ended then
    return {'status', run[3], 'timed_out_running', ended[1], 'timed_out_queued', ended[2]}
  end
elseif run[1] and NOW >= tonumber(run[2]) + tonumber(run[1]) then
  local reason = string.format('timed out after %gs (its run timeout)', tonumber(run[1]) / 1000)
  emit('run.timed_out', false, 'timeout_ms', run[1])
  local running, queued, teardown, tearing_down = stop_run('failed', reason)
  if not tearing_down then status = finish_run('failed') end
  return {'status', status, 'timed_out_running', running, 'timed_out_queued', queued,
          'teardown', teardown, 'tearing_down', tearing_down and '1' or ''}
end
local limit = ARGV[5]
local requeued = {}
-- A node whose lease expired lost its worker (a host lost, an eviction, a SIGKILL of the
-- whole process group: no parent survived to see the death, death.lua) or hung it. No fault
-- of the node's is known, so it does not count towards poison; it is queued again after a
-- backoff that doubles with each loss since its last outcome (ARGV[8] ms, at most ARGV[9]
-- ms; 0: at once), waiting in RETRY_WAIT on 'lost' for `status` to show. The run's timeout
-- bounds the waits, and max_worker_losses their number (the claimant checks).
local function lost_worker(node, holder, requeued)
  local losses = redis.call('HINCRBY', K.losses, node, 1)
  local delay_ms = math.min(tonumber(ARGV[9]), tonumber(ARGV[8]) * 2 ^ (losses - 1))
  if delay_ms <= 0 then return queue_node(node, requeued) end
  redis.call('HSET', K.state, node, 'retry_wait')
  redis.call('ZADD', K.retry, NOW + delay_ms, node)
  redis.call('HSET', K.waits, node, cjson.encode({
    on = 'lost', name = holder, since_ms = NOW, until_ms = NOW + delay_ms, count = losses}))
  emit('node.delayed', node, 'on', 'lost', 'until_ms', NOW + delay_ms, 'losses', losses)
end
for _, node in ipairs(redis.call('ZRANGEBYSCORE', K.leases, '-inf', NOW, 'LIMIT', 0, limit)) do
  local holder = redis.call('HGET', K.holder, node) or ''
  release(node)
  emit('node.lease_expired', node, 'holder', holder)
  lost_worker(node, holder, requeued)
end
for _, node in ipairs(redis.call('ZRANGEBYSCORE', K.retry, '-inf', NOW, 'LIMIT', 0, limit)) do
  redis.call('ZREM', K.retry, node)
  queue_node(node, requeued)
end
-- A release of a fan-out in chunks (prelude.lua settle_dependents) left untouched for
-- ARGV[3] ms while its pool is empty or nobody pulled from it for as long (its workers
-- died between two chunks): counted on here, ARGV[5] dependents a pass.
local function release_stalled()
  if redis.call('EXISTS', K.settling) == 0 then return false end
  local pulled_at = tonumber(redis.call('HGET', K.run, 'pool_pulled_at') or 0)
  if redis.call('EXISTS', K.pool) == 1 and NOW - pulled_at < tonumber(ARGV[3]) then
    return false
  end
  settle_budget = tonumber(limit)
  local _, counted = settle_on(requeued, NOW - tonumber(ARGV[3]))
  return counted
end
if release_stalled() then  -- the dependents it decided may have been the run's last open nodes
  local ended = finalize_if_done()
  if ended ~= '' then return {'status', ended} end
end

-- Entries older than the cutoff that `keep` accepts (at most `count`, else `limit`),
-- re-stamped (all of them) so the next pass does not look at them again before another period.
local function overdue(key, age_ms, keep, count)
  local found = {}
  for _, node in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', NOW - tonumber(age_ms), 'LIMIT', 0, count or limit)) do
    redis.call('ZADD', key, NOW, node)
    local dispatch = redis.call('HGET', K.dispatch, node)
    if keep(node, dispatch) then
      found[#found + 1] = {node, redis.call('HGET', K.fence, node), dispatch}
    end
  end
  return found
end

local empty_queues = {}
for i = 10, #ARGV do empty_queues[ARGV[i]] = true end
local function any() return true end
local function stranded(node, dispatch)
  local queue = cjson.decode(dispatch).queue
  return not redis.call('ZSCORE', K.outbox, node) and empty_queues[queue]
      and not redis.call('ZSCORE', K.pool, pool_member(queue, pool_rank(dispatch), node))
end

-- A pool nobody pulled from for ARGV[3] ms has lost its workers (or they are all busy
-- for that long): its nodes are published like unconfirmed ones, ARGV[5] per pass.
local function from_idle_pool(found)
  if redis.call('EXISTS', K.pool) == 0 then return end
  local pulled_at = tonumber(redis.call('HGET', K.run, 'pool_pulled_at') or 0)
  if NOW - pulled_at < tonumber(ARGV[3]) then return end
  redis.call('HSET', K.run, 'pool_pulled_at', NOW)
  local tally = {}
  for _, chunk in ipairs(chunks(redis.call('ZRANGE', K.pool, 0, tonumber(limit) - 1))) do
    unpool_all(chunk, found, tally)
  end
  count_tallied(tally)
end

-- Priority aging (docs/internals/priorities-and-fairness.md): a node whose
-- message has waited in the broker over ARGV[6] ms (queued, published, not pooled) and
-- whose priority is below the top is listed, at most ARGV[7] a pass, for the caller to
-- publish again ahead of every priority (same fence: the message it leaves behind is
-- dropped at its claim). 0 turns it off. Re-stamped like the others: a node still
-- waiting after another period is listed again.
local function starving(node, dispatch)
  local rank = pool_rank(dispatch)
  return rank ~= '0' and not redis.call('ZSCORE', K.outbox, node)
      and not redis.call('ZSCORE', K.pool, pool_member(cjson.decode(dispatch).queue, rank, node))
end
local function aged_nodes()
  if tonumber(ARGV[6]) <= 0 then return {} end
  return overdue(K.queued, ARGV[6], starving, ARGV[7])
end

local unpublished = overdue(K.outbox, ARGV[3], any)
from_idle_pool(unpublished)
local stranded_nodes = {}
if next(empty_queues) ~= nil then stranded_nodes = overdue(K.queued, ARGV[4], stranded) end
local aged = aged_nodes()
-- A run waiting for its concurrency key: the caller asks its gate again (run_gates.py).
local gated = redis.call('HGET', K.run, 'gate') == 'waiting' and 1 or 0
-- How long it has been open (since its creation or its last re-opening): past
-- run_max_age_s the caller fails it (age_out.lua).
local age_ms = NOW - math.max(tonumber(run[2] or NOW), tonumber(run[5] or 0))
return {'status', status, 'requeued', requeued, 'unpublished', unpublished,
        'stranded', stranded_nodes, 'aged', aged, 'gated', gated, 'age_ms', age_ms}
