-- anarchon redis script strategy: the claim-only decision of docs/spec.md#s3-2 over
-- the job's stream of claims, decided atomically: nothing else runs while a
-- script runs.
--
-- KEYS[1] {ns:job}:runs  stream  one entry per claim: slot, token,
--                                instance; auto IDs: the ID is the store
--                                time of the claim (no 'at' field: every
--                                field costs the scan)
-- ARGV: slot, token, instance, window_ms, max_late_ms
-- Reply: {outcome, token, now_ms, entry_id}:
--   found  a claim of the slot is in the window: token and id are its own
--          (the caller won iff token is the caller's: a re-sent claim);
--   added  nobody claimed the slot within the window: the caller's claim
--          was appended (token is the caller's, id the new entry's);
--   late   nobody claimed it and store now - slot > max_late: nothing was
--          written (token and id are '').
local runs = KEYS[1]
local slot, token, instance = ARGV[1], ARGV[2], ARGV[3]
local window, max_late = tonumber(ARGV[4]), tonumber(ARGV[5])

-- Store time, read here, after every earlier claim of the job has run, and
-- the window's first ID.
local now, from = store_window(window)

local id, tok = newest_claim(runs, slot, from)
if id then
  return {'found', tok, now, id}
end

if now - tonumber(slot) > max_late then
  return {'late', '', now, ''}
end
-- Append the caller's claim and forget the entries older than the window.
id = redis.call('XADD', runs, 'MINID', '~', from, '*',
  'slot', slot, 'token', token, 'instance', instance)
return {'added', token, now, id}
