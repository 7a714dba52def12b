-- Write one file of the run's workspace for a node this worker still runs. Fenced like
-- progress.lua: a worker that lost its node (re-queued, cancelled, run over) writes
-- nothing, so no zombie overwrites a file and no key outlives its run without a TTL.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] path, ARGV[6] content. Returns {'owned', 1},
-- or {'owned', 0} if not ours.
if not owns(ARGV[3], ARGV[4], 'running') then return {'owned', 0} end
redis.call('HSET', K.workspace, ARGV[5], ARGV[6])
return {'owned', 1}
