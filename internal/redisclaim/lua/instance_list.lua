-- anarchon redis: read every instance record (docs/spec.md#s6-cluster) and
-- Redis TIME, in one call on the records' key.
--
-- KEYS[1] <ns>:instances
-- Reply: {seconds, microseconds, name1, record1, name2, record2, ...}
local t = redis.call('TIME')
local out = {t[1], t[2]}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all do
  out[#out + 1] = all[i]
end
return out
