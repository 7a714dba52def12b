-- Extend the slots a worker's running nodes hold. ARGV[1] ttl ms, then one holder member
-- per limit. Returns {'held', how many were still held} (a lost one was reaped: its
-- worker stalled).
local held = 0
for i = 1, #ARGV - 1 do
  if redis.call('ZSCORE', holders(i), ARGV[1 + i]) then
    redis.call('ZADD', holders(i), NOW + tonumber(ARGV[1]), ARGV[1 + i])
    held = held + 1
  end
end
return {'held', held}
