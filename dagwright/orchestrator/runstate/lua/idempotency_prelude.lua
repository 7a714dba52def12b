-- Shared by create_run.lua and claim_idempotency_key.lua (prepended by store.py): an idempotency key.
-- Takes `key` for `run_id` (for `ttl_s` seconds) unless it names another run already, and
-- returns the run it names now. `stale` (or '') is a holder whose run never appeared (its
-- submitter died between an older client's claim and its write): it is taken over.
local function claim_key(key, run_id, ttl_s, stale)
  local current = redis.call('GET', key)
  if current and current ~= stale then return current end
  redis.call('SET', key, run_id, 'EX', ttl_s)
  return run_id
end
