-- anarchon redis claim-only strategies: helpers the scripts that scan a
-- job's stream of claims start with (the Go side prepends this file).

-- store_window returns the store time (Redis TIME, in ms) and the first ID
-- of the window of window_ms before it ('%.0f': never Lua's 1.7e+12
-- notation).
local function store_window(window)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return now, string.format('%.0f', math.max(now - window, 0))
end

-- newest_claim returns the ID, token and instance of the newest claim of
-- slot in the stream runs with an ID from `from` on; nil when there is
-- none. Newest first, in batches: the losers of a slot find the winner's
-- entry among the newest (a small first batch: every entry read is
-- converted for Lua); only the slot's first claim reads the whole window.
local function newest_claim(runs, slot, from)
  local batch, hi = 8, '+'
  while true do
    local entries = redis.call('XREVRANGE', runs, hi, from, 'COUNT', batch)
    for _, e in ipairs(entries) do
      local f = e[2]
      local s, tok, inst
      for i = 1, #f, 2 do
        local k = f[i]
        if k == 'slot' then
          s = f[i + 1]
          if s ~= slot then
            break
          end
        elseif k == 'token' then
          tok = f[i + 1]
        elseif k == 'instance' then
          inst = f[i + 1]
        end
      end
      if s == slot and tok then
        return e[1], tok, inst
      end
    end
    if #entries < batch then
      return nil
    end
    hi = '(' .. entries[#entries][1]
    batch = 256
  end
end
