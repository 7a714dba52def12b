-- Count the pooled nodes of every active run again and put the pooled-nodes counter
-- right (execution/backlog.py). KEYS[1] the active-run set, KEYS[2] the counter (hash
-- queue -> pooled nodes). A run's pool is ARGV[1] .. run_id .. ARGV[2], its settling hash
-- ARGV[1] .. run_id .. ARGV[3] (its entries' uncounted dependents count): built here, not
-- declared, so this runs on a standalone Valkey only (on a cluster each slot's runs would
-- be counted apart). Pools hold only open runs' nodes (a run's end empties its pool), and
-- open runs are all in the active set. One step: no script changes a pool meanwhile.
-- Returns {'runs', active runs looked at, 'drift', {queue, counted, found, ...}}.
local found = {}
local function add(queue, count) found[queue] = (found[queue] or 0) + count end
local runs = redis.call('SMEMBERS', KEYS[1])
for _, run_id in ipairs(runs) do
  local pool = ARGV[1] .. run_id .. ARGV[2]
  if redis.call('EXISTS', pool) == 1 then
    for _, member in ipairs(redis.call('ZRANGE', pool, 0, -1)) do add(string.match(member, '^[^\t]*'), 1) end
  end
  -- the dependents a chunked release has yet to count (prelude.lua settle_some)
  local settling = redis.call('HVALS', ARGV[1] .. run_id .. ARGV[3])
  for _, raw in ipairs(settling) do
    local entry = cjson.decode(raw)
    if entry[5] then add(entry[5], tonumber(entry[3]) - tonumber(entry[2])) end
  end
end
local drift = {}
local counted = redis.call('HGETALL', KEYS[2])
local seen = {}
for i = 1, #counted, 2 do
  local queue, count = counted[i], tonumber(counted[i + 1])
  seen[queue] = true
  if count ~= (found[queue] or 0) then
    drift[#drift + 1] = queue
    drift[#drift + 1] = count
    drift[#drift + 1] = found[queue] or 0
    if found[queue] then redis.call('HSET', KEYS[2], queue, found[queue]) else redis.call('HDEL', KEYS[2], queue) end
  end
end
for queue, count in pairs(found) do
  if not seen[queue] then
    drift[#drift + 1] = queue
    drift[#drift + 1] = 0
    drift[#drift + 1] = count
    redis.call('HSET', KEYS[2], queue, count)
  end
end
return {'runs', #runs, 'drift', drift}
