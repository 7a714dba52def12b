-- Append a span to its run's spans stream; the stream follows the run hash's expiry
-- (see recorder.py). KEYS: the run's spans stream, its run hash. ARGV: the stream's cap,
-- the field, the span. Returns {'written', 1 or 0} (0: the run is gone, span dropped).
local run_ttl_ms = redis.call('PTTL', KEYS[2])
if run_ttl_ms == -2 then return {'written', 0} end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', ARGV[2], ARGV[3])
if run_ttl_ms > 0 then redis.call('PEXPIRE', KEYS[1], run_ttl_ms) end
return {'written', 1}
