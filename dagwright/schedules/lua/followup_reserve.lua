-- Reserve a follow-up run of a scheduled run, once per goal. KEYS[1] the run's
-- follow-ups hash (goal digest -> follow-up run id, '' while starting); ARGV: the goal's
-- digest, the schedule's max_followups, the retention in seconds.
-- Returns {'verdict', 'ok'|'duplicate'|'full', 'existing', run id or ''}.
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then return {'verdict', 'duplicate', 'existing', existing} end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[2]) then
  return {'verdict', 'full', 'existing', ''}
end
redis.call('HSET', KEYS[1], ARGV[1], '')
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {'verdict', 'ok', 'existing', ''}
