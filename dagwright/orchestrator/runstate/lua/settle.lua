-- Release the next chunk of a big fan-out: count on the dependents of the nodes whose
-- success left them partly counted (K.settling, prelude.lua settle_dependents), at most
-- SETTLE_CHUNK of them, as complete.lua would have. The worker that completed the node
-- calls it until nothing is left; each call is a short script, so other runs' commands
-- run between them.
-- Returns {'status', 'ok', 'ready', {{node, fence, dispatch}...}, 'settling', 1 or 0,
-- 'run_finished', final run status or ''} or {'status', 'stale'} for a run no longer open.
if not is_open(run_status()) then return {'status', 'stale'} end
local ready = {}
settle_budget = SETTLE_CHUNK
local left = settle_on(ready)
return {'status', 'ok', 'ready', ready, 'settling', left and 1 or 0,
        'run_finished', finalize_if_done()}
