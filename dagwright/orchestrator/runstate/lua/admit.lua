-- Let a run waiting for its concurrency key start, if the key has a place for it
-- (orchestrator/control/run_gates.py). SHARED[1] the key's holders (run -> ms it took its
-- place), SHARED[2] its waiters (run -> ms it was created: first come, first served).
-- ARGV[3] the run id, ARGV[4] the longest a run may wait (ms from its creation): past
-- it, the run fails without having started (its open nodes cancelled), and 'expired' is
-- 1 in the reply. The caller has dropped the holders and waiters whose runs ended.
-- Admitted, the run holds a place until it ends (forget drops it) and its roots start
-- (each due later waits for its delayed start instead). Returns {'admitted', 1, 'held',
-- n, 'ready', {node, fence, dispatch}...}, or {'admitted', 0, 'held', n, 'ready', {}}
-- while the key is full (n: its holders now), or if the run no longer waits.
local run_id = ARGV[3]
local holders, waiters = SHARED[1], SHARED[2]
local run = redis.call('HMGET', K.run, 'gate', 'concurrency_limit', 'created_at', 'not_before_ms')
if not is_open(run_status()) or run[1] ~= 'waiting' then
  return {'admitted', 0, 'held', 0, 'ready', {}}
end
redis.call('ZADD', waiters, 'NX', tonumber(run[3]), run_id)
local held = redis.call('ZCARD', holders)
local waited_ms = NOW - tonumber(run[3])
if waited_ms >= tonumber(ARGV[4]) then
  redis.call('ZREM', waiters, run_id)
  stop_open_nodes()
  local key = redis.call('HGET', K.run, 'concurrency_key')
  redis.call('HSET', K.run, 'stop_reason', string.format(
    'waited %gs for a place of concurrency key %s (%d of %s runs running); the limit is ' ..
    'DAGWRIGHT_CONCURRENCY_KEY_MAX_WAIT_S', waited_ms / 1000, key, held, run[2]))
  emit('run.gate_expired', false, 'key', key)
  finish_run('failed')
  return {'admitted', 0, 'held', held, 'ready', {}, 'expired', 1}
end
if held + redis.call('ZRANK', waiters, run_id) >= tonumber(run[2]) then
  redis.call('HSET', K.run, 'gate_held', held)
  return {'admitted', 0, 'held', held, 'ready', {}}
end
redis.call('ZREM', waiters, run_id)
redis.call('ZADD', holders, NOW, run_id)
redis.call('HSET', K.run, 'gate', 'admitted', 'gate_held', held + 1)
emit('run.admitted', false, 'key', redis.call('HGET', K.run, 'concurrency_key'))
local ready = {}
local waits = redis.call('HGETALL', K.waits)
for i = 1, #waits, 2 do
  local node = waits[i]
  if redis.call('HGET', K.state, node) == 'retry_wait' and cjson.decode(waits[i + 1]).on == 'concurrency' then
    redis.call('HDEL', K.waits, node)
    start_node(node, ready, run[4])
  end
end
return {'admitted', 1, 'held', held + 1, 'ready', ready}
