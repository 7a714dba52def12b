-- Admit a run waiting for its concurrency key, once gate_take.lua has decided in the key's
-- slot (orchestrator/control/run_gates.py, machine.py admit). ARGV[3] the run id, ARGV[4]
-- 1 if it holds a place now, ARGV[5] the key's holders, ARGV[6] 1 if it waited too long:
-- then the run fails without having started (its open nodes cancelled), and 'expired' is
-- 1 in the reply. Admitted, the run holds a place until it ends (forget drops it) and its
-- roots start (each due later waits for its delayed start instead). Returns {'admitted',
-- 1, 'held', n, 'ready', {node, fence, dispatch}...}, or {'admitted', 0, 'held', n,
-- 'ready', {}} while the key is full, or if the run no longer waits (a repeat after a
-- caller died: the place it took is its own, and it was admitted).
local run_id = ARGV[3]
local held = tonumber(ARGV[5])
local run = redis.call('HMGET', K.run, 'gate', 'concurrency_limit', 'created_at', 'not_before_ms')
if not is_open(run_status()) or run[1] ~= 'waiting' then
  return {'admitted', 0, 'held', held, 'ready', {}}
end
if ARGV[6] == '1' then
  stop_open_nodes()
  local key = redis.call('HGET', K.run, 'concurrency_key')
  local waited_ms = NOW - tonumber(run[3])
  redis.call('HSET', K.run, 'stop_reason', string.format(
    'waited %gs for a place of concurrency key %s (%d of %s runs running); the limit is ' ..
    'DAGWRIGHT_CONCURRENCY_KEY_MAX_WAIT_S', waited_ms / 1000, key, held, run[2]))
  emit('run.gate_expired', false, 'key', key)
  finish_run('failed')
  return {'admitted', 0, 'held', held, 'ready', {}, 'expired', 1}
end
if ARGV[4] ~= '1' then
  redis.call('HSET', K.run, 'gate_held', held)
  return {'admitted', 0, 'held', held, 'ready', {}}
end
redis.call('HSET', K.run, 'gate', 'admitted', 'gate_held', held)
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
return {'admitted', 1, 'held', held, 'ready', ready}
