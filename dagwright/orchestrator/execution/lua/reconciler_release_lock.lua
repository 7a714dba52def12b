-- Delete the reconciler's lock only if this reconciler still holds it (not one that
-- took it since). KEYS[1] the lock, ARGV[1] this reconciler's token. Returns
-- {'released', 1 or 0}.
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  released = redis.call('DEL', KEYS[1])
end
return {'released', released}
