-- Compact a run that has ended, for the rest of its retention (docs/internals/retention.md).
-- Called once its end is seen, before forget.lua (whoever forgets the run compacts it
-- first; compacting twice is compacting once). Touches the run's keys only.
-- ARGV[3] how long a succeeded run keeps its nodes' checkpoints (s; 0: dropped now, -1:
-- as long as the run), ARGV[4] how long its events stream is kept (s; -1: as long as the
-- run), ARGV[5] its spans stream (the trace's recorded spans), likewise, ARGV[6] how many
-- nodes a step folds (machine.py FOLD_CHUNK). SHARED[1],
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
-- are folded into one string, K.nodes (see fold_node_columns), a chunk a step: a step that
-- leaves some says 'folding' 1, and the caller calls again (forget.lua leaves the run
-- active until then).
-- A failed or cancelled run keeps all that: a replay re-opens it from them.
-- Returns {'status', run status, 'dropped', count of keys deleted, 'folding', 1 while the
-- fold has chunks left}; 'open' if still open.
local status = run_status()
if not status then return {'status', 'missing', 'dropped', 0, 'folding', 0} end
if is_open(status) then return {'status', 'open', 'dropped', 0, 'folding', 0} end
local ttl_ms = redis.call('PTTL', K.run)
local dropped = 0

-- A succeeded run's per-node columns folded into one string, K.nodes: past
-- hash-max-listpack-entries a hash costs ~40 B per field whatever its value, five columns
-- of 1,000 nodes ~230 KB for ~60 KB of data. One JSON object {since, rows}: a row per
-- node in the order of K.state (a small run's plan order), [node, state, attempts,
-- started, finished, output], the two times as ms after `since` (the run's creation) and
-- attempts as numbers (a value that is no number stays a string), a missing value null.
-- snapshots.unfold reads it. Folded FOLD_CHUNK nodes a step (decision 126): a 10,000-node
-- run's fold in one step held the server ~25 ms. The rows go to K.folding, which no
-- reader reads, the HSCAN cursor of K.state to the run hash's fold_cursor; the last step
-- copies K.folding to K.nodes and drops it and the five columns, so a reader sees the
-- columns or the fold, never a part of it. A node HSCAN returns twice (a rehash between
-- steps) has its row twice, alike: unfold keeps the last. Once folded (K.nodes exists)
-- nothing is left to fold: compacting twice is compacting once.
local FOLD_CHUNK = tonumber(ARGV[6])
local FOLDED = {K.state, K.attempts, K.started, K.finished, K.output}
local SINCE = {nil, nil, 0, 1, 1, nil}  -- per column: what a number counts from (1: since)

-- The rows of `nodes`, whose states are `flat`'s values, as JSON array elements (no
-- brackets; '' for none).
local function rows_text(nodes, flat, since)
  if #nodes == 0 then return '' end
  local columns, rows = {}, {}
  for i = 2, #FOLDED do columns[i] = redis.call('HMGET', FOLDED[i], unpack(nodes)) end
  for j, node in ipairs(nodes) do
    local row = {node, flat[2 * j]}
    for i = 2, #FOLDED do
      local value, base = columns[i][j], SINCE[i + 1]
      if not value then
        value = cjson.null
      elseif base and tonumber(value) then
        value = tonumber(value) - base * since
      end
      row[i + 1] = value
    end
    rows[j] = row
  end
  return string.sub(cjson.encode(rows), 2, -2)
end

-- Fold the nodes of K.state's HSCAN step from `cursor` ('0': the first). Returns whether
-- some are left (the caller calls again).
local function fold_some(cursor)
  local since = tonumber(redis.call('HGET', K.run, 'created_at')) or 0
  local scan = redis.call('HSCAN', K.state, cursor, 'COUNT', FOLD_CHUNK)
  local flat, nodes = scan[2], {}
  for j = 1, #flat, 2 do nodes[#nodes + 1] = flat[j] end
  local text = rows_text(nodes, flat, since)
  if cursor == '0' then
    redis.call('SET', K.folding, '{"since":' .. string.format('%d', since) .. ',"rows":[' .. text)
  elseif text ~= '' then
    local empty = redis.call('GETRANGE', K.folding, -1, -1) == '['
    redis.call('APPEND', K.folding, (empty and '' or ',') .. text)
  end
  if scan[1] ~= '0' then
    redis.call('HSET', K.run, 'fold_cursor', scan[1])
    if ttl_ms > 0 then redis.call('PEXPIRE', K.folding, ttl_ms) end
    return true
  end
  redis.call('APPEND', K.folding, ']}')
  -- COPY, not RENAME: an APPENDed string keeps up to as much again of room to grow, a
  -- copy is allocated at its length
  redis.call('COPY', K.folding, K.nodes, 'REPLACE')
  redis.call('DEL', K.folding)
  if ttl_ms > 0 then redis.call('PEXPIRE', K.nodes, ttl_ms) end
  redis.call('HDEL', K.run, 'fold_cursor')
  for _, key in ipairs(FOLDED) do dropped = dropped + redis.call('UNLINK', key) end
  return false
end

local function fold_node_columns()
  if redis.call('EXISTS', K.nodes) == 1 or redis.call('EXISTS', K.state) == 0 then return false end
  return fold_some('0')
end

-- A fold under way (a step before left some): its next chunk, the rest was done then.
local cursor = redis.call('HGET', K.run, 'fold_cursor')
if cursor then
  local left = fold_some(cursor)
  return {'status', status, 'dropped', dropped, 'folding', left and 1 or 0}
end
dropped = redis.call('DEL', K.plan)

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

local folding = false
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
  folding = fold_node_columns()
  redis.call('HSET', K.run, 'compacted', NOW)
end
return {'status', status, 'dropped', dropped, 'folding', folding and 1 or 0}
