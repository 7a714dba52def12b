-- Write one file of the run's workspace for a node this worker still runs. Fenced like
-- progress.lua: a worker that lost its node (re-queued, cancelled, run over) writes
-- nothing, so no zombie overwrites a file and no key outlives its run without a TTL.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] path, ARGV[6] content. Returns 1, or 0 if not ours.
if not owns(ARGV[3], ARGV[4], 'running') then return 0 end
redis.call('HSET', K.workspace, ARGV[5], ARGV[6])
return 1
