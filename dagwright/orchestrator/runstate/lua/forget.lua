-- The run-slot half of dropping an ended run from the active set (machine.py forget does
-- the rest, in other Cluster slots). ARGV[3] the run id, ARGV[4] '1' to queue its trace's
-- export. Returns {'closed', 0} if the run is open (a replay may have re-opened it since
-- its caller saw it end: it stays active; with 'folding', 1 while compact.lua's fold has
-- steps left), else {'closed', 1, 'now', the server's time in
-- ms, 'export', 0/1, 'webhooks', {ids}, 'concurrency_key', the run's or '', 'ended',
-- status or '', 'finished_at', ms}: the caller queues the export and the webhook
-- deliveries, adds the run to its ended set, then drops it from the active set.
-- The steps an ended run owes are decided here, so whichever process saw it end (its last
-- worker, a cancel, or the reconciler after a crash) queues them, and a crash cannot lose
-- them: the run stays in the active set until the caller has queued them, and a repeat
-- returns the same ones again (queueing is idempotent: ZADD NX):
-- - its trace's export (telemetry/trace_export.py), if ARGV[4] is '1';
-- - SHARED[1] (the run's webhook log): one delivery per webhook of the run hash's
--   `webhooks` whose `on` names the end (dagwright/webhooks/), logged here, its id
--   returned while its record is pending. Its id names the end (finished_at), so queueing
--   twice is once and a replayed run that ends again is told again;
-- - SHARED[2] (the run's scores, runstate/scores.py): the run's time to live, so that no
--   score outlives its run (one written after the end took it in score.lua);
-- - SHARED[3] (the run's node logs, runstate/node_logs.py): the run's time to live, too;
-- - the ended runs by status (keys.ended_runs, global): returned as 'ended' (succeeded,
--   failed, cancelled, or '' for none of them) and 'finished_at', scored by its end; the
--   caller adds the run to that set before it leaves the active set.
local status = run_status()
if is_open(status) then return {'closed', 0} end
-- compact.lua's fold of a big run has steps left: the run stays active (so whoever sees
-- it next goes on) until the last one
if redis.call('HEXISTS', K.run, 'fold_cursor') == 1 then return {'closed', 0, 'folding', 1} end

local function wants(hook, event)
  for _, wanted in ipairs(hook.on or {}) do
    if wanted == event then return true end
  end
  return false
end

local due = {}
local function queue_webhooks()
  local fields = redis.call('HMGET', K.run, 'webhooks', 'finished_at')
  if not fields[1] or not fields[2] then return end
  for i, hook in ipairs(cjson.decode(fields[1])) do
    if wants(hook, status) then
      local id = ARGV[3] .. '.' .. fields[2] .. '.' .. i
      local record = cjson.encode({id = id, run_id = ARGV[3], hook = i - 1, url = hook.url,
        event = 'run.' .. status, state = 'pending', queued_ms = NOW})
      redis.call('HSETNX', SHARED[1], id, record)
      if cjson.decode(redis.call('HGET', SHARED[1], id)).state == 'pending' then
        due[#due + 1] = id
      end
    end
  end
  redis.call('EXPIRE', SHARED[1], RETENTION_S)
end

local function expire_scores_and_logs()
  local ttl = redis.call('PTTL', K.run)
  if ttl > 0 then
    redis.call('PEXPIRE', SHARED[2], ttl)
    redis.call('PEXPIRE', SHARED[3], ttl)
  end
end

local ENDED = {succeeded = true, failed = true, cancelled = true}

if status then
  queue_webhooks()
  expire_scores_and_logs()
end
-- The run's concurrency key, if any: the caller gives its place back (run_gates.py).
return {'closed', 1, 'now', NOW, 'export', (status and ARGV[4] == '1') and 1 or 0, 'webhooks', due,
        'concurrency_key', redis.call('HGET', K.run, 'concurrency_key') or '',
        'ended', ENDED[status] and status or '',
        'finished_at', redis.call('HGET', K.run, 'finished_at') or NOW}
