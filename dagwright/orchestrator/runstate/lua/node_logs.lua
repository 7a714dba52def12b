-- Append a node attempt's log lines to its run's log stream (runstate/node_logs.py).
-- KEYS[1] the run's hash, KEYS[2] the run's log stream; ARGV[1] the stream's approximate
-- cap (lines), ARGV[2..] each line's JSON.
-- The run's check and the write are one step, so the logs cannot outlive their run: the
-- stream takes the run hash's time to live (none while the run is open; when it ends,
-- forget.lua gives it the run's, and a replay that re-opens the run takes it away).
-- Returns {'status', 'ok', 'last', the last entry's id} or {'status', 'unknown'} if there
-- is no such run (or it expired): nothing is written then.
if redis.call('HEXISTS', KEYS[1], 'status') == 0 then return {'status', 'unknown'} end
local last = ''
for i = 2, #ARGV do
  last = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'line', ARGV[i])
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
else
  redis.call('PERSIST', KEYS[2])
end
return {'status', 'ok', 'last', last}
