-- Take one pooled node of one of the queues ARGV[3..] (pull_from_pool), for a worker whose
-- node ended some other way than a success (which pulls in complete.lua).
-- Returns {'status', 'ok', 'ready', {} or {{node, fence, dispatch}...}}.
local ready = {}
settle_budget = SETTLE_CHUNK  -- a drained pool may get the next chunk of its fan-out
if is_open(run_status()) then pull_from_pool({unpack(ARGV, 3)}, ready) end
return {'status', 'ok', 'ready', ready}
