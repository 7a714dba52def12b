-- Take one of a half-open breaker's probe slots, if one is free. KEYS[1] the probes
-- counter, ARGV[1] the number of probes, ARGV[2] the slots' ttl ms.
-- Returns {'taken', 1 or 0}.
local taken = redis.call('INCR', KEYS[1])
if taken == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if taken > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return {'taken', 0}
end
return {'taken', 1}
