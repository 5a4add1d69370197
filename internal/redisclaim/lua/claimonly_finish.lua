-- anarchon redis claim-only strategies (stream-id, idmp, script): record a
-- run's result in the job's results stream (docs/spec.md#s3-2,
-- docs/spec.md#s6-outcomes). Not a lease fence: it refuses only a token
-- that is not the claim's winner, where the claim entry is known and
-- still in the stream.
--
-- KEYS[1] {ns:job}:runs, KEYS[2] {ns:job}:results
-- ARGV: slot, token, claim_id ('' when unknown), instance ('' when unknown:
--       taken from the claim entry), status, exit_code ('' for none),
--       started_ms, finished_ms, output_tail, results_maxlen, job,
--       window_ms (script: with no claim_id, look for the slot's newest
--       claim within the window; 0: do not look)
-- Reply: {'ok', 'checked' | 'unchecked' | 'resent'} or {'fenced'}.
local runs, results = KEYS[1], KEYS[2]
local slot, token, id, instance = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local status, exit_code, tail = ARGV[5], ARGV[6], ARGV[9]
local window = tonumber(ARGV[12])

local function fields(f)
  local m = {}
  for i = 1, #f, 2 do
    m[f[i]] = f[i + 1]
  end
  return m
end

-- The claim entry of the run: by its ID, or the newest of the slot within
-- the window.
local c
if id ~= '' then
  local e = redis.call('XRANGE', runs, id, id)
  if #e == 1 then
    c = fields(e[1][2])
  end
elseif window > 0 then
  local _, from = store_window(window)
  local found, tok, inst = newest_claim(runs, slot, from)
  if found then
    c = {slot = slot, token = tok, instance = inst}
  end
end

local checked = 'unchecked'
if c then
  if c.slot ~= slot or c.token ~= token then
    return {'fenced'}
  end
  if instance == '' then
    instance = c.instance or ''
  end
  checked = 'checked'
end

-- A Finish re-sent after its answer was lost finds its result among the
-- newest and is not stored twice.
for _, e in ipairs(redis.call('XREVRANGE', results, '+', '-', 'COUNT', 32)) do
  local r = fields(e[2])
  if r.slot == slot and r.token == token and r.status == status
      and r.exit_code == exit_code and r.output_tail == tail then
    return {'ok', 'resent'}
  end
end

redis.call('XADD', results, 'MAXLEN', '~', ARGV[10], '*',
  'job', ARGV[11], 'slot', slot, 'attempt', '1', 'instance', instance, 'token', token,
  'status', status, 'exit_code', exit_code, 'started_at', ARGV[7], 'finished_at', ARGV[8],
  'output_tail', tail)
return {'ok', checked}
