-- Claim a queued node for execution: QUEUED + fence -> RUNNING with a lease.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] lease ms, ARGV[6] holder "<host>:<pid>",
-- ARGV[7] takeover: '' or the holder whose death was confirmed (its node is taken over).
-- Returns {'ok', spec, attempt, checkpoint ('' if none), deliveries, the run's
-- max_concurrent_nodes ('' if none), dep1, out1, ...},
-- {'held', holder} or {'stale', why}. deliveries counts the claims since the node last
-- recorded an outcome: each one more means a worker died running it (the poison guard).
local node, fence, holder, takeover = ARGV[3], ARGV[4], ARGV[6], ARGV[7]
local status = run_status()
if not is_open(status) then return {'stale', 'run is ' .. tostring(status)} end
if redis.call('HGET', K.fence, node) ~= fence then return {'stale', 'fence'} end
local state = redis.call('HGET', K.state, node)
if state == 'running' then
  local current = redis.call('HGET', K.holder, node) or ''
  if takeover == '' or current ~= takeover then return {'held', current} end
  release(node)
  emit('node.takeover', node, 'from', current)
elseif state ~= 'queued' then
  return {'stale', tostring(state)}
end
redis.call('HSET', K.state, node, 'running')
redis.call('HSET', K.holder, node, holder)
local attempt = redis.call('HINCRBY', K.attempts, node, 1)
local deliveries = redis.call('HINCRBY', K.deliveries, node, 1)
redis.call('HSET', K.started, node, NOW)
redis.call('ZREM', K.queued, node)
redis.call('ZREM', K.outbox, node)
redis.call('ZADD', K.leases, NOW + tonumber(ARGV[5]), node)
redis.call('HINCRBY', K.run, 'running', 1)
emit('node.running', node, 'attempt', attempt, 'holder', holder)
local reply = {'ok', redis.call('HGET', K.spec, node), attempt,
               redis.call('HGET', K.checkpoint, node) or '', deliveries,
               redis.call('HGET', K.run, 'max_concurrent_nodes') or ''}
local deps = cjson.decode(redis.call('HGET', K.deps, node))
-- HMGET in chunks: unpack() of thousands of arguments overflows Lua's C stack.
for first = 1, #deps, 500 do
  local chunk = {}
  for i = first, math.min(first + 499, #deps) do chunk[#chunk + 1] = deps[i] end
  local outputs = redis.call('HMGET', K.output, unpack(chunk))
  for i = 1, #chunk do
    reply[#reply + 1] = chunk[i]
    reply[#reply + 1] = outputs[i]
  end
end
return reply
