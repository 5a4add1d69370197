-- anarchon redis: write a job's control record (docs/spec.md#s6-control)
-- if it is still at the caller's version: compare and set, one script.
--
-- KEYS[1] {ns:job}:control (hash: version, paused, until, reason, by, at,
--         triggers)
-- ARGV: previous version (0: the job has no record), paused ("1" or "0"),
--       until (ms, 0: until resumed), reason, by, at (ms), triggers (JSON
--       text, '' for none)
-- Reply: {1, new version} written, or {0, stored version} refused.
local key = KEYS[1]
local cur = tonumber(redis.call('HGET', key, 'version') or '0')
if cur ~= tonumber(ARGV[1]) then
  return {0, cur}
end
local v = cur + 1
redis.call('HSET', key, 'version', v, 'paused', ARGV[2], 'until', ARGV[3],
  'reason', ARGV[4], 'by', ARGV[5], 'at', ARGV[6], 'triggers', ARGV[7] or '')
return {1, v}
