-- Compact a run that has ended, for the rest of its retention (docs/internals/retention.md).
-- Called once its end is seen, before forget.lua (whoever forgets the run compacts it
-- first; compacting twice is compacting once). Touches the run's keys only.
-- ARGV[3] how long a succeeded run keeps its nodes' checkpoints (s; 0: dropped now, -1:
-- as long as the run), ARGV[4] how long its events stream is kept (s; -1: as long as the
-- run), ARGV[5] its spans stream (the trace's recorded spans), likewise. SHARED[1],
-- SHARED[2]: the run's node logs and scores streams (keys.run_logs, keys.run_scores: the
-- run's hash tag, so this stays one slot), shrunk as its own streams are.
-- Every ended run:
-- - loses `plan` (the plan's JSON as submitted: no surface reads it, `spec` holds each node);
-- - has its small streams (`done`, `events`, `spans`, `audit`, logs, scores) copied over themselves: a
--   stream's last node is allocated at stream-node-max-bytes (4 KB) and keeps that slack,
--   which a copy (COPY allocates what is used) gives back: 4.3 KB -> 0.3 KB for `done`;
-- - keeps its events and spans for ARGV[4], ARGV[5] if shorter than the run.
-- A succeeded run can never run again (a replay needs a failed node), so it also loses
-- what only running or replaying reads: the columns of the scheduler (dispatch, deps,
-- dependents, remaining, fence, the trigger-rule counters, countdowns, the poison
-- guard's and budget's bookkeeping) and, per ARGV[3], its checkpoints. The run hash says
-- so: `compacted` (epoch ms) and `checkpoints` ('dropped', or the epoch ms they expire).
-- Its per-node columns read after the end (state, attempts, started, finished, output)
-- are folded into one string, K.nodes (see fold_node_columns).
-- A failed or cancelled run keeps all that: a replay re-opens it from them.
-- Returns {'status', run status, 'dropped', count of keys deleted}; 'open' if still open.
local status = run_status()
if not status then return {'status', 'missing', 'dropped', 0} end
if is_open(status) then return {'status', 'open', 'dropped', 0} end
local ttl_ms = redis.call('PTTL', K.run)
local dropped = redis.call('DEL', K.plan)

-- A stream copied over itself (through K.settling, empty once a run has ended), keeping
-- its time to live (COPY copies it).
local function shrink(key)
  if redis.call('EXISTS', key) == 0 then return end
  redis.call('COPY', key, K.settling, 'REPLACE')
  redis.call('RENAME', K.settling, key)
end
for _, key in ipairs({K.done, K.events, K.spans, K.audit, SHARED[1], SHARED[2]}) do shrink(key) end

-- A key kept `seconds` (-1: as long as the run) if that is shorter than the run's time.
local function keep_for(key, seconds)
  if seconds < 0 or (ttl_ms > 0 and seconds * 1000 >= ttl_ms) then return end
  if seconds == 0 then
    dropped = dropped + redis.call('UNLINK', key)
  else
    redis.call('EXPIRE', key, seconds)
  end
end
keep_for(K.events, tonumber(ARGV[4]))
keep_for(K.spans, tonumber(ARGV[5]))

-- A succeeded run's per-node columns folded into one string, K.nodes: past
-- hash-max-listpack-entries a hash costs ~40 B per field whatever its value, five columns
-- of 1,000 nodes ~230 KB for ~60 KB of data. One JSON object {since, rows}: a row per
-- node in the order of K.state (a small run's plan order), [node, state, attempts,
-- started, finished, output], the two times as ms after `since` (the run's creation) and
-- attempts as numbers (a value that is no number stays a string), a missing value null.
-- snapshots.unfold reads it. Once folded (K.nodes exists) nothing is left to fold:
-- compacting twice is compacting once.
local FOLDED = {K.state, K.attempts, K.started, K.finished, K.output}
local SINCE = {nil, nil, 0, 1, 1, nil}  -- per column: what a number counts from (1: since)
local function fold_node_columns()
  if redis.call('EXISTS', K.nodes) == 1 or redis.call('EXISTS', K.state) == 0 then return end
  local since = tonumber(redis.call('HGET', K.run, 'created_at')) or 0
  local columns = {}
  for i = 2, #FOLDED do
    columns[i] = {}
    local flat = redis.call('HGETALL', FOLDED[i])
    for j = 1, #flat, 2 do columns[i][flat[j]] = flat[j + 1] end
  end
  local rows, flat = {}, redis.call('HGETALL', K.state)
  for j = 1, #flat, 2 do
    local node, row = flat[j], {flat[j], flat[j + 1]}
    for i = 2, #FOLDED do
      local value, base = columns[i][node], SINCE[i + 1]
      if value == nil then
        value = cjson.null
      elseif base and tonumber(value) then
        value = tonumber(value) - base * since
      end
      row[i + 1] = value
    end
    rows[#rows + 1] = row
  end
  redis.call('SET', K.nodes, cjson.encode({since = since, rows = rows}))
  if ttl_ms > 0 then redis.call('PEXPIRE', K.nodes, ttl_ms) end
  for _, key in ipairs(FOLDED) do dropped = dropped + redis.call('UNLINK', key) end
end

if status == 'succeeded' then
  for _, key in ipairs({K.dispatch, K.deps, K.dependents, K.remaining, K.fence,
                        K.failed_deps, K.skipped_deps, K.run_if, K.countdown, K.deaths, K.losses,
                        K.first_failure, K.reserved, K.holder, K.waits, K.settling}) do
    -- UNLINK: a 10,000-node run's hashes are freed off the main thread
    dropped = dropped + redis.call('UNLINK', key)
  end
  local checkpoints_s = tonumber(ARGV[3])
  if redis.call('EXISTS', K.checkpoint) == 1 then
    keep_for(K.checkpoint, checkpoints_s)
    if checkpoints_s == 0 then
      redis.call('HSET', K.run, 'checkpoints', 'dropped')
    elseif checkpoints_s > 0 and (ttl_ms <= 0 or checkpoints_s * 1000 < ttl_ms) then
      redis.call('HSET', K.run, 'checkpoints', NOW + checkpoints_s * 1000)
    end
  end
  fold_node_columns()
  redis.call('HSET', K.run, 'compacted', NOW)
end
return {'status', status, 'dropped', dropped}
