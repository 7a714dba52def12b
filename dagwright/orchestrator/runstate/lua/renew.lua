-- Extend the lease of a node this worker still holds. ARGV[3] node, ARGV[4] fence,
-- ARGV[5] lease ms. Returns {'owned', 1}, or
-- {'owned', 0} if the node is no longer ours (re-queued, cancelled).
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'owned', 0} end
redis.call('ZADD', K.leases, 'XX', NOW + tonumber(ARGV[5]), node)
return {'owned', 1}
