-- The process running a node died and its worker's parent process, which survived, saw it:
-- a prefork child killed by a signal (an OOM kill, a segfault, os._exit) or by the pool's
-- hard time limit (tasks/deaths.py). Counted against the node (the poison guard: claim.lua
-- replies the count, which the claimant compares with max_deliveries) only while the
-- claim that died is still the node's: same fence, still running.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] cause ('signal 9', 'hard time limit 31s'...).
-- Returns {'counted', deaths} or {'counted', 0} when the claim is no longer the node's.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'counted', 0} end
local deaths = redis.call('HINCRBY', K.deaths, node, 1)
emit('node.process_died', node, 'cause', ARGV[5], 'deaths', deaths)
return {'counted', deaths}
