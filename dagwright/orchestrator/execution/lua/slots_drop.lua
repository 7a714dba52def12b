-- Forget a waiter whose node no longer waits (its run ended, or it ran), and list the
-- waiters that may take its place. ARGV[1] member, ARGV[2] grace ms, ARGV[3] name,
-- ARGV[4] size (one limit). Returns {'waiters', {{name, member}, ...}, 'empty',
-- {name, ...}} (the limits left empty, on a Cluster: see the prelude).
redis.call('ZREM', waiters(1), ARGV[1])
redis.call('ZREM', woken(1), ARGV[1])
local out = {}
wake(1, ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[2]), out)
return {'waiters', out, 'empty', EMPTIED}
