-- The first step of failing a run open past the maximum age (settings.run_max_age_s), as
-- the reconciler finds it (execution/reconciler.py, machine.py age_out): mark the run
-- as aged out and list the nodes to fail, with their fences, for the caller to add their
-- dead letters to the DLQ stream (another Cluster slot: runstate/dead_letters.py) before
-- age_out.lua fails them naming those letters. The nodes: every node at work or ready to
-- be (queued, running, parked, waiting for an approval, or pending with no dependency
-- left: a run waiting for its concurrency key). A fan-out's release in chunks ends here
-- (its nodes left are decided by age_out.lua's failures).
-- The mark (the run hash's `aged_out`, the reason status shows, and `aged_out_at`, the
-- server time of the first step) is set once: a later call (a retry of a caller that
-- died, a second round for the handlers the failures readied) finds it, and with it
-- when the dead letters of this age-out may have been added (`since`), so that the
-- caller reuses those instead of adding them twice. A replay clears both (replay.lua).
-- ARGV[3] the maximum age in ms (from `created_at` or `reopened_at`), ARGV[4] the reason.
-- Returns {'status', its status, 'since', aged_out_at or '', 'resumed', '1' if it was
-- marked before this call, 'nodes', {{node, fence}...}}; an open run not too old (and
-- not marked) has no `since`, and nothing is done.
local status = run_status()
if not status or not is_open(status) then
  return {'status', tostring(status), 'since', '', 'resumed', '', 'nodes', {}}
end
local run = redis.call('HMGET', K.run, 'created_at', 'reopened_at', 'aged_out_at')
local marked = run[3]
if not marked then
  local since = math.max(tonumber(run[1] or NOW), tonumber(run[2] or 0))
  if NOW - since < tonumber(ARGV[3]) then
    return {'status', status, 'since', '', 'resumed', '', 'nodes', {}}
  end
  redis.call('HSET', K.run, 'aged_out', ARGV[4], 'aged_out_at', NOW)
  emit('run.aged_out', false, 'max_age_ms', ARGV[3])
  settling_clear()  -- every node a chunk has yet to release is decided by the failures
end

local AT_WORK = {queued = true, running = true, retry_wait = true, waiting_approval = true}
local nodes = {}
local states = redis.call('HGETALL', K.state)
for i = 1, #states, 2 do
  local node, state = states[i], states[i + 1]
  if AT_WORK[state] or (state == 'pending' and counter(K.remaining, node) == 0) then
    nodes[#nodes + 1] = {node, redis.call('HGET', K.fence, node) or '0'}
  end
end
return {'status', status, 'since', marked or tostring(NOW), 'resumed', marked and '1' or '',
  'nodes', nodes}
