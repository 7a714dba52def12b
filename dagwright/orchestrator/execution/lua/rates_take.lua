-- Take a start of every rate limit of a claimed node, or of none (all or nothing).
-- KEYS: one window per rate (zset start member -> server ms it started). ARGV[1] the
-- start's member "<run>/<node>@<fence>", then (count, period ms) per rate, in KEYS order.
-- A rate has room if fewer than `count` starts lie within the last `period`: a sliding
-- window, so no `period` ever holds more than `count` starts (a fixed window lets 2x
-- through across its edge). Time is the server's, as in the other scripts.
-- Returns {'status', 'ok'} or {'status', 'wait', 'rate', i (1-based), 'wait_ms', ms}: the
-- rate that is full longest, and how long until it has room.
local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local member = ARGV[1]
local longest, longest_ms = 0, 0
for i = 1, #KEYS do
  local count, period = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', NOW - period)
  local started = redis.call('ZCARD', KEYS[i])
  if started >= count then
    -- The start that must leave the window before one more fits.
    local leaving = redis.call('ZRANGE', KEYS[i], started - count, started - count, 'WITHSCORES')
    local wait_ms = tonumber(leaving[2]) + period - NOW + 1
    if wait_ms > longest_ms then longest, longest_ms = i, wait_ms end
  end
end
if longest > 0 then return {'status', 'wait', 'rate', longest, 'wait_ms', longest_ms} end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], NOW, member)
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2 * i + 1]) + 1000)
end
return {'status', 'ok'}
