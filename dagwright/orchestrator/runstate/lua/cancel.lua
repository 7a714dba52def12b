-- Cancel a run: every node not yet final becomes CANCELLED, nothing more is dispatched,
-- and a late completion of a running node fails its state check. ARGV[3] reason (kept as
-- the run's stop_reason: a stopped run is never re-opened).
-- Returns {'outcome', 'cancelled', 'running', {running nodes}, 'queued',
-- {{node, fence, dispatch}} of the queued ones}, {'outcome', 'missing'}, or
-- {'outcome', status} if the run was already final.
-- A run with teardown nodes (run_if: always) stays open for them (stop_run, prelude):
-- 'teardown' lists those it queued, to publish; a cancel of a run already stopping
-- changes nothing: {'outcome', 'tearing_down'}.
local status = run_status()
if not status then return {'outcome', 'missing'} end
if not is_open(status) then return {'outcome', status} end
if redis.call('HEXISTS', K.run, 'stopping') == 1 then return {'outcome', 'tearing_down'} end
local running, queued, teardown, tearing_down = stop_run('cancelled', ARGV[3])
if not tearing_down then finish_run('cancelled') end
return {'outcome', 'cancelled', 'running', running, 'queued', queued, 'teardown', teardown,
        'tearing_down', tearing_down and '1' or ''}
