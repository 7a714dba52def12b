-- Cancel a run: every node not yet final becomes CANCELLED, nothing more is dispatched,
-- and a late completion of a running node fails its state check. ARGV[3] reason (kept as
-- the run's stop_reason: a stopped run is never re-opened).
-- Returns {'outcome', 'cancelled', 'running', {running nodes}, 'queued',
-- {{node, fence, dispatch}} of the queued ones}, {'outcome', 'missing'}, or
-- {'outcome', status} if the run was already final.
local status = run_status()
if not status then return {'outcome', 'missing'} end
if not is_open(status) then return {'outcome', status} end
local running, queued = stop_open_nodes()
redis.call('HSET', K.run, 'stop_reason', ARGV[3])
finish_run('cancelled')
return {'outcome', 'cancelled', 'running', running, 'queued', queued}
