-- Drop a run from the active set (SHARED[1]) unless it is open: a replay may have
-- re-opened it since its caller saw it end. ARGV[3] the run id, ARGV[4] '1' to queue its
-- trace's export. Returns {'forgotten', 1} if dropped, else {'forgotten', 0}, and
-- 'concurrency_key' (the run's, or '').
-- The steps an ended run owes are queued here, in the same step, so whichever process
-- saw it end (its last worker, a cancel, or the reconciler after a crash) queues them and
-- a crash cannot lose them (the run stays in the active set until this runs):
-- - SHARED[2] (the OTLP export queue): its trace (telemetry/trace_export.py);
-- - SHARED[3] (webhooks due) and SHARED[4] (the run's webhook log): one delivery per
--   webhook of the run hash's `webhooks` whose `on` names the end (dagwright/webhooks/).
--   Its id names the end (finished_at), so queueing twice is once and a replayed run
--   that ends again is told again;
-- - SHARED[5] (the run's scores, runstate/scores.py): the run's time to live, so that no
--   score outlives its run (one written after the end took it in score.lua);
-- - SHARED[6] (the run's node logs, runstate/node_logs.py): the run's time to live, too;
-- - SHARED[7..9] (the ended runs by status: succeeded, failed, cancelled): the run joins
--   its status's, scored by its end, for the metrics to count (keys.ended_runs).
local status = run_status()
if is_open(status) then return {'forgotten', 0} end
if status and ARGV[4] == '1' then redis.call('ZADD', SHARED[2], 'NX', NOW, ARGV[3]) end

local function wants(hook, event)
  for _, wanted in ipairs(hook.on or {}) do
    if wanted == event then return true end
  end
  return false
end

local function queue_webhooks()
  local fields = redis.call('HMGET', K.run, 'webhooks', 'finished_at')
  if not fields[1] or not fields[2] then return end
  for i, hook in ipairs(cjson.decode(fields[1])) do
    if wants(hook, status) then
      local id = ARGV[3] .. '.' .. fields[2] .. '.' .. i
      local record = cjson.encode({id = id, run_id = ARGV[3], hook = i - 1, url = hook.url,
        event = 'run.' .. status, state = 'pending', queued_ms = NOW})
      if redis.call('HSETNX', SHARED[4], id, record) == 1 then
        redis.call('ZADD', SHARED[3], NOW, id)
      end
    end
  end
  redis.call('EXPIRE', SHARED[4], RETENTION_S)
end

local function expire_scores_and_logs()
  local ttl = redis.call('PTTL', K.run)
  if ttl > 0 then
    redis.call('PEXPIRE', SHARED[5], ttl)
    redis.call('PEXPIRE', SHARED[6], ttl)
  end
end

local ENDED = {succeeded = SHARED[7], failed = SHARED[8], cancelled = SHARED[9]}
local function count_ended()
  if not ENDED[status] then return end
  local finished_at = redis.call('HGET', K.run, 'finished_at') or NOW
  redis.call('ZADD', ENDED[status], finished_at, ARGV[3])
end

if status then
  queue_webhooks()
  expire_scores_and_logs()
  count_ended()
end
-- The run's concurrency key, if any: the caller gives its place back (run_gates.py).
return {'forgotten', redis.call('SREM', SHARED[1], ARGV[3]),
        'concurrency_key', redis.call('HGET', K.run, 'concurrency_key') or ''}
