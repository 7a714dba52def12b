-- Drop a run from the active set (SHARED[1]) unless it is open: a replay may have
-- re-opened it since its caller saw it end. ARGV[3] the run id. Returns 1 if dropped.
if is_open(run_status()) then return 0 end
return redis.call('SREM', SHARED[1], ARGV[3])
