-- anarchon redis lease: a heartbeat (docs/spec.md#s4). lease_until = now + lease,
-- only where the run is running under the caller's token.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:live
-- ARGV: slot, token, lease_ms
-- Reply: {'ok', attempt, now_ms, lease_until_ms} or {'fenced'}.
local state, live = KEYS[1], KEYS[2]
local run, now = move_lease(state, live, ARGV[1], ARGV[2], tonumber(ARGV[3]))
if not run then
  return now -- the reply: {'fenced'} or the error
end
return {'ok', run.attempt, now, run.lease_until}
