-- Take a slot of every limit of a claimed node, or of none (all or nothing).
-- ARGV[1] the node as a waiter "<run>/<node>", ARGV[2] as a holder "<run>/<node>@<fence>",
-- ARGV[3] slot ttl ms, ARGV[4] when the node first asked ('' unknown: read here), then
-- (name, size) per limit, the run's before the type's before the key's.
-- A limit has room for the node if its holders plus the waiters that asked before it
-- leave a slot: waiting nodes keep their place. Refused, the node waits at the first
-- limit without room (and only there: a node that cannot use a free type slot, its run
-- being full, does not hold up other runs' nodes), keeping the time it first asked.
-- On a Cluster each call names one limit (limits.py takes them in order, and gives back
-- what it took when one refuses).
-- Returns {'status', 'ok', 'taken', {name, ...}} (the limits taken by this call, not held
-- already), or {'status', 'wait', 'limit', name}.
local waiter, holder, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local n = (#ARGV - 4) / 2
local function name_of(i) return ARGV[3 + 2 * i] end
local function size_of(i) return tonumber(ARGV[4 + 2 * i]) end

local first = tonumber(ARGV[4]) or NOW
for i = 1, n do
  drop_expired(i)
  local asked = redis.call('ZSCORE', waiters(i), waiter)
  if asked and tonumber(asked) < first then first = tonumber(asked) end
end

local taken = {}
for i = 1, n do
  if not redis.call('ZSCORE', holders(i), holder) then  -- a takeover holds it already
    -- Waiters before it: by rank if it waits here (ties in time go by name), else those
    -- that asked no later than it did.
    local ahead = redis.call('ZRANK', waiters(i), waiter)
    if not ahead then ahead = redis.call('ZCOUNT', waiters(i), '-inf', first) end
    if redis.call('ZCARD', holders(i)) + ahead >= size_of(i) then
      for j = 1, n do
        redis.call('ZREM', woken(j), waiter)
        if j ~= i then
          redis.call('ZREM', waiters(j), waiter)
          tidy(j, name_of(j))
        end
      end
      redis.call('ZADD', waiters(i), first, waiter)
      register(name_of(i), size_of(i))
      return {'status', 'wait', 'limit', name_of(i)}
    end
    taken[#taken + 1] = name_of(i)
  end
end

for i = 1, n do
  redis.call('ZADD', holders(i), NOW + ttl, holder)
  redis.call('ZREM', waiters(i), waiter)
  redis.call('ZREM', woken(i), waiter)
  register(name_of(i), size_of(i))
end
return {'status', 'ok', 'taken', taken}
