-- Reserve the run's budget for a node's next LLM call, before the call is made. It fits
-- if what the run spent, plus what the calls of other nodes in flight hold, plus its
-- worst case stays within every limit the run has; it then holds its worst case (one
-- reservation per node: a node has at most one call in flight) until progress.lua
-- records the call's usage, or the node stops running (`release`) or is claimed again,
-- so a dead worker's reservation does not outlive its lease. Limits and amounts are
-- the dimensions of workers/budgets.py.
-- ARGV[3] node, ARGV[4] fence, ARGV[5] the call's worst case, JSON {dimension: amount}.
-- Returns {'status', 'ok'} (held, or the run has no budget), {'status', 'lost'} (the
-- node is not this worker's), or {'status', 'over', 'dimension', d, 'limit', n,
-- 'spent', n, 'held', n held by others, 'projected', the call's worst case}.
local node, fence = ARGV[3], ARGV[4]
if not owns(node, fence, 'running') then return {'status', 'lost'} end
local run = redis.call('HMGET', K.run, 'budget_input_tokens', 'budget_output_tokens',
  'budget_tokens', 'budget_usd', 'input_tokens', 'cache_read_input_tokens',
  'cache_creation_input_tokens', 'output_tokens', 'cost_usd', 'cache_discount_tokens')
if not (run[1] or run[2] or run[3] or run[4]) then return {'status', 'ok'} end
local function number(value) return tonumber(value or 0) end
-- input as billed (workers/budgets.py): cache reads and writes weighted by their price
local input = number(run[5]) + number(run[6]) + number(run[7]) - number(run[10])
local spent = {input_tokens = input, output_tokens = number(run[8]),
               total_tokens = input + number(run[8]), cost_usd = number(run[9])}
local held = {input_tokens = 0, output_tokens = 0, total_tokens = 0, cost_usd = 0}
local reservations = redis.call('HGETALL', K.reserved)
for i = 1, #reservations, 2 do
  if reservations[i] ~= node then
    for name, amount in pairs(cjson.decode(reservations[i + 1])) do
      held[name] = held[name] + amount
    end
  end
end
local call = cjson.decode(ARGV[5])
local limits = {{'input_tokens', run[1]}, {'output_tokens', run[2]},
                {'total_tokens', run[3]}, {'cost_usd', run[4]}}
for _, limit in ipairs(limits) do
  local name, max = limit[1], limit[2]
  if max and spent[name] + held[name] + call[name] > tonumber(max) then
    return {'status', 'over', 'dimension', name, 'limit', max, 'spent', tostring(spent[name]),
            'held', tostring(held[name]), 'projected', tostring(call[name])}
  end
end
redis.call('HSET', K.reserved, node, ARGV[5])
return {'status', 'ok'}
