-- anarchon redis lease: end a lease now (SPEC §4 graceful stop), only where
-- the run is running under the caller's token. The lease ends one
-- millisecond before now, so that lease_until < now holds at once and a
-- backup's claim in the same millisecond already takes over.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:live, KEYS[3] {ns:job}:history
-- ARGV: slot, token, history_maxlen
-- Reply: {'ok'} or {'fenced'}.
local state, live, history = KEYS[1], KEYS[2], KEYS[3]
local slot, token = ARGV[1], ARGV[2]

local raw = redis.call('HGET', state, slot)
if not raw then
  return {'fenced'}
end
local ok, run = pcall(cjson.decode, raw)
if not ok or type(run) ~= 'table' then
  return redis.error_reply('ERR anarchon: unreadable state of slot ' .. slot .. ' in ' .. state)
end
if run.status ~= 'running' or run.token ~= token then
  return {'fenced'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', history, 'MAXLEN', '~', ARGV[3], '*',
  'event', 'released', 'slot', slot, 'attempt', run.attempt, 'token', token,
  'instance', run.instance)
run.lease_until = now - 1
redis.call('HSET', live, slot, run.lease_until)
redis.call('HSET', state, slot, cjson.encode(run))
return {'ok'}
