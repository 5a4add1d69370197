-- anarchon redis lease: a heartbeat (SPEC §4). lease_until = now + lease,
-- only where the run is running under the caller's token.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:live
-- ARGV: slot, token, lease_ms
-- Reply: {'ok', attempt, now_ms, lease_until_ms} or {'fenced'}.
local state, live = KEYS[1], KEYS[2]
local slot, token = ARGV[1], ARGV[2]

local run, reply = owned_run(state, slot, token)
if not run then
  return reply
end
local now = store_now()
set_lease(state, live, slot, run, now + tonumber(ARGV[3]))
return {'ok', run.attempt, now, run.lease_until}
