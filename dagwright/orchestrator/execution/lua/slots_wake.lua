-- Free a node's slots (ARGV[1] its holder member; '' frees none) and list the waiters
-- that may take the room now. ARGV[2] grace ms (a waiter published within it is not
-- published again), then (name, size) per limit. Returns {'waiters', {{name, member},
-- ...}, 'empty', {name, ...}} (the limits left empty, on a Cluster: see the prelude).
local holder, grace = ARGV[1], tonumber(ARGV[2])
local out = {}
for i = 1, (#ARGV - 2) / 2 do
  if holder ~= '' then redis.call('ZREM', holders(i), holder) end
  wake(i, ARGV[1 + 2 * i], tonumber(ARGV[2 + 2 * i]), grace, out)
end
return {'waiters', out, 'empty', EMPTIED}
