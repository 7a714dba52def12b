-- Record a running node's progress in one round trip: its checkpoint, the usage of one
-- LLM call (added to the node's and the run's totals, in place of its reservation of the
-- run's budget) and an event. Fenced: a worker that lost the node records nothing
-- (returns {'owned', 0}; else {'owned', 1}). It also renews the lease.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] lease ms, ARGV[6] checkpoint JSON ('' = unchanged),
-- ARGV[7] usage JSON of one call ('' = none), ARGV[8] event as a JSON array
-- [kind, field, value, ...] ('' = none).
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'owned', 0} end
redis.call('ZADD', K.leases, 'XX', NOW + tonumber(ARGV[5]), node)
if ARGV[6] ~= '' then redis.call('HSET', K.checkpoint, node, ARGV[6]) end
if ARGV[7] ~= '' then
  local call = cjson.decode(ARGV[7])
  local total = cjson.decode(redis.call('HGET', K.usage, node) or '{}')
  for field, value in pairs(call) do
    total[field] = (total[field] or 0) + value
    if field == 'cost_usd' then
      redis.call('HINCRBYFLOAT', K.run, field, string.format('%.9f', value))
    else
      redis.call('HINCRBY', K.run, field, value)
    end
  end
  redis.call('HSET', K.usage, node, cjson.encode(total))
  redis.call('HDEL', K.reserved, node)  -- the call's usage replaces its reservation
end
if ARGV[8] ~= '' then
  local fields = cjson.decode(ARGV[8])
  emit(fields[1], node, unpack(fields, 2))
end
return {'owned', 1}
