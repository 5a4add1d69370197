-- anarchon redis: write an instance's heartbeat record (docs/spec.md#s6-cluster)
-- stamped with Redis TIME, and prune the records past their retention.
--
-- KEYS[1] <ns>:instances (hash: instance name -> record)
-- A record is "<expires>:<retain>:<seen>:<skew>:<json>": the expiry and
-- retention first, so that the prune reads them without decoding the JSON.
-- ARGV: name, ttl (ms), retain (ms), the instance's clock at the beat (ms,
--       0: unknown), the record's JSON, prune ("1": prune the others)
-- Reply: {seen, expires, skew}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local sent = tonumber(ARGV[4])
local skew = 0
if sent ~= 0 then
  skew = sent - now
end
local expires = now + tonumber(ARGV[2])
if ARGV[6] == '1' then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local e, r = string.match(all[i + 1], '^(%d+):(%d+):')
    if e == nil or tonumber(e) + tonumber(r) <= now then
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
end
redis.call('HSET', KEYS[1], ARGV[1],
  string.format('%d:%d:%d:%d:', expires, tonumber(ARGV[3]), now, skew) .. ARGV[5])
return {now, expires, skew}
