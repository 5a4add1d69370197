-- anarchon redis lease: end a lease now (docs/spec.md#s4-stop), only where
-- the run is running under the caller's token. The lease ends one
-- millisecond before now, so that lease_until < now holds at once and a
-- backup's claim in the same millisecond already takes over.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:live, KEYS[3] {ns:job}:history
-- ARGV: slot, token, history_maxlen
-- Reply: {'ok'} or {'fenced'}.
local state, live, history = KEYS[1], KEYS[2], KEYS[3]
local slot, token = ARGV[1], ARGV[2]

local run, reply = move_lease(state, live, slot, token, -1)
if not run then
  return reply
end
redis.call('XADD', history, 'MAXLEN', '~', ARGV[3], '*',
  'event', 'released', 'slot', slot, 'attempt', run.attempt, 'token', token,
  'instance', run.instance)
return {'ok'}
