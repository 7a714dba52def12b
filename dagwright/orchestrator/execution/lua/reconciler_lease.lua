-- One reconciler's lease on one active-run bucket (execution/buckets.py). KEYS[1] the
-- bucket's lease, ARGV[1] the reconciler's token, ARGV[2] the lease in ms, ARGV[3] what
-- to do: 'take' (renew it if held, else take it if free), 'renew' (only if held) or
-- 'release' (delete it if held: never one another reconciler took since).
-- Returns {'held', 1 or 0}: whether this reconciler holds it now.
local mine = redis.call('GET', KEYS[1]) == ARGV[1]
if ARGV[3] == 'release' then
  if mine then redis.call('DEL', KEYS[1]) end
  return {'held', 0}
end
if mine then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'held', 1}
end
if ARGV[3] == 'take' and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'held', 1}
end
return {'held', 0}
