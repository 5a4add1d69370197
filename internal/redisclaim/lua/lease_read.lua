-- anarchon redis lease: the cheap read of a run (docs/spec.md#s3-1), run with
-- EVALSHA_RO: it writes nothing. Store time comes from the node that holds
-- the run, in the same reading.
--
-- KEYS[1] {ns:job}:state
-- ARGV: slot
-- Reply: {now_ms, run JSON or nil}.
local now = store_now()
return {now, redis.call('HGET', KEYS[1], ARGV[1])}
