-- Add one score to a run (runstate/scores.py). KEYS[1] the run's hash, KEYS[2] the run's
-- scores stream; ARGV[1] the score's JSON, ARGV[2] the most scores a run may hold.
-- The run's check, the bound and the write are one step, so a score cannot outlive its
-- run: the stream takes the run hash's time to live (none while the run is open; when it
-- ends, forget.lua gives it the run's).
-- Returns {'status', 'ok', 'id', entry id}, {'status', 'unknown'} if there is no such run
-- (or it expired), or {'status', 'full', 'count', n} if it holds the most already.
if redis.call('HEXISTS', KEYS[1], 'status') == 0 then return {'status', 'unknown'} end
local count = redis.call('XLEN', KEYS[2])
if count >= tonumber(ARGV[2]) then return {'status', 'full', 'count', count} end
local id = redis.call('XADD', KEYS[2], '*', 'score', ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
else
  redis.call('PERSIST', KEYS[2])
end
return {'status', 'ok', 'id', id}
