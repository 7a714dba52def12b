-- The concurrency key's half of admitting a run (orchestrator/control/run_gates.py): its
-- places are in the key's Cluster slot, the run in its own, so a place is taken here and
-- the run admitted after, by admit.lua (machine.py admit). KEYS[1] the key's holders (run
-- -> ms it took its place), KEYS[2] its waiters (run -> ms it was created: first come,
-- first served). ARGV[1] the run id, ARGV[2] its creation (ms), ARGV[3] the key's limit,
-- ARGV[4] the longest a run may wait (ms from its creation).
-- Returns {'taken', 0/1, 'held', n, 'expired', 0/1}: taken (now, or before by a caller that
-- died before admit.lua: the run is admitted again), or expired (it waited too long and
-- left the waiters: admit.lua fails it), else it waits (n: the key's holders now).
local run_id = ARGV[1]
if redis.call('ZSCORE', KEYS[1], run_id) then
  return {'taken', 1, 'held', redis.call('ZCARD', KEYS[1]), 'expired', 0}
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZADD', KEYS[2], 'NX', tonumber(ARGV[2]), run_id)
local held = redis.call('ZCARD', KEYS[1])
if now - tonumber(ARGV[2]) >= tonumber(ARGV[4]) then
  redis.call('ZREM', KEYS[2], run_id)
  return {'taken', 0, 'held', held, 'expired', 1}
end
if held + redis.call('ZRANK', KEYS[2], run_id) >= tonumber(ARGV[3]) then
  return {'taken', 0, 'held', held, 'expired', 0}
end
redis.call('ZREM', KEYS[2], run_id)
redis.call('ZADD', KEYS[1], now, run_id)
return {'taken', 1, 'held', held + 1, 'expired', 0}
