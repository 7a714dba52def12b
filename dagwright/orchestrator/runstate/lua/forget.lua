-- Drop a run from the active set (SHARED[1]) unless it is open: a replay may have
-- re-opened it since its caller saw it end. ARGV[3] the run id. Returns {'forgotten', 1}
-- if dropped, else {'forgotten', 0}.
-- With SHARED[2] (the OTLP export queue), an ended run joins it in the same step, so
-- its trace is exported whichever process saw it end (orchestrator/trace_export.py).
local status = run_status()
if is_open(status) then return {'forgotten', 0} end
if SHARED[2] and status then redis.call('ZADD', SHARED[2], 'NX', NOW, ARGV[3]) end
return {'forgotten', redis.call('SREM', SHARED[1], ARGV[3])}
