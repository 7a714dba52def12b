-- An idempotency key alone (see idempotency_prelude.lua). KEYS[1]: the key.
-- ARGV: run id, TTL in seconds, stale holder or ''.
return {'owner', claim_key(KEYS[1], ARGV[1], ARGV[2], ARGV[3])}
