-- anarchon redis idmp strategy: configure a job's stream of claims for
-- idempotent XADD (docs/spec.md#s3-2) before its first claim, atomically: no claim
-- can slip in between the check and the setting.
--
-- XCFGSET needs an existing stream, and it clears the stream's idempotency
-- maps (every remembered claim): so the stream is created empty when it is
-- missing, and XCFGSET is sent only when the current values differ.
--
-- KEYS[1] {ns:job}:runs
-- ARGV: idmp_duration_s, idmp_maxsize
-- Reply: {action, old_duration, old_maxsize}: action is 'same' (nothing
-- sent), 'created' (a new stream, configured) or 'set' (an existing
-- stream's settings differed and were replaced: its maps were cleared);
-- the old values are 0 where XINFO STREAM showed none.
local runs = KEYS[1]
local duration, maxsize = tonumber(ARGV[1]), tonumber(ARGV[2])

local created = false
if redis.call('EXISTS', runs) == 0 then
  -- An empty stream: one entry added and deleted (its ID stays the last
  -- generated one, below every later auto ID).
  local id = redis.call('XADD', runs, '*', 'anarchon', 'init')
  redis.call('XDEL', runs, id)
  created = true
end

local info = redis.call('XINFO', 'STREAM', runs)
local cur_duration, cur_maxsize = 0, 0
for i = 1, #info, 2 do
  if info[i] == 'idmp-duration' then
    cur_duration = tonumber(info[i + 1]) or 0
  elseif info[i] == 'idmp-maxsize' then
    cur_maxsize = tonumber(info[i + 1]) or 0
  end
end
if cur_duration == duration and cur_maxsize == maxsize then
  return {'same', cur_duration, cur_maxsize}
end
redis.call('XCFGSET', runs, 'IDMP-DURATION', duration, 'IDMP-MAXSIZE', maxsize)
if created then
  return {'created', cur_duration, cur_maxsize}
end
return {'set', cur_duration, cur_maxsize}
