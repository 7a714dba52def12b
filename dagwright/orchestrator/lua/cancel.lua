-- Cancel a run: every node not yet final becomes CANCELLED, nothing more is dispatched,
-- and a late completion of a running node fails its state check. ARGV[3] reason.
-- Returns {'cancelled', {running nodes}} or {status} if the run was already final.
local status = run_status()
if not status then return {'missing'} end
if not is_open(status) then return {status} end
local running = {}
local states = redis.call('HGETALL', K.state)
for i = 1, #states, 2 do
  local node, state = states[i], states[i + 1]
  if state == 'running' then running[#running + 1] = node end
  if state == 'waiting_approval' then redis.call('HINCRBY', K.run, 'waiting_approval', -1) end
  if state ~= 'succeeded' and state ~= 'failed' and state ~= 'blocked' and state ~= 'cancelled'
      and state ~= 'replaced' then
    set_final(node, 'cancelled')
    emit('node.cancelled', node, 'was', state)
  end
end
for _, key in ipairs({K.queued, K.outbox, K.leases, K.retry, K.holder}) do
  redis.call('DEL', key)
end
redis.call('HSET', K.run, 'running', 0, 'cancel_reason', ARGV[3])
finish_run('cancelled')
return {'cancelled', running}
