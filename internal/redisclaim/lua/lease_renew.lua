-- anarchon redis lease: a heartbeat (SPEC §4). lease_until = now + lease,
-- only where the run is running under the caller's token.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:live
-- ARGV: slot, token, lease_ms
-- Reply: {'ok', attempt, now_ms, lease_until_ms} or {'fenced'}.
local state, live = KEYS[1], KEYS[2]
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
run.lease_until = now + tonumber(ARGV[3])
redis.call('HSET', live, slot, run.lease_until)
redis.call('HSET', state, slot, cjson.encode(run))
return {'ok', run.attempt, now, run.lease_until}
