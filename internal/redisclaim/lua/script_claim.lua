-- anarchon redis script strategy: the claim-only decision of SPEC §3.2 over
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

-- Store time, read here, after every earlier claim of the job has run.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The window's first ID (ms; '%.0f': never Lua's 1.7e+12 notation).
local from = string.format('%.0f', math.max(now - window, 0))

-- Newest first, in batches: the losers of a slot find the winner's entry
-- among the newest (a small first batch: every entry read is converted for
-- Lua); only the slot's first claim reads the whole window.
local batch = 8
local hi = '+'
while true do
  local entries = redis.call('XREVRANGE', runs, hi, from, 'COUNT', batch)
  for _, e in ipairs(entries) do
    local f = e[2]
    local s, tok
    for i = 1, #f, 2 do
      local k = f[i]
      if k == 'slot' then
        s = f[i + 1]
        if s ~= slot then
          break
        end
      elseif k == 'token' then
        tok = f[i + 1]
      end
    end
    if s == slot and tok then
      return {'found', tok, now, e[1]}
    end
  end
  if #entries < batch then
    break
  end
  hi = '(' .. entries[#entries][1]
  batch = 256
end

if now - tonumber(slot) > max_late then
  return {'late', '', now, ''}
end
-- Append the caller's claim and forget the entries older than the window.
local id = redis.call('XADD', runs, 'MINID', '~', from, '*',
  'slot', slot, 'token', token, 'instance', instance)
return {'added', token, now, id}
