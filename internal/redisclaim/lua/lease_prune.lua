-- anarchon redis lease: forget old runs of one job, one batch at a time.
-- A run goes when its slot is older than cutoff = now - older_than and it is
-- finished or its lease ended before the cutoff; a live lease ends after
-- now, so a live run never goes. On the last batch the history events older
-- than the cutoff are trimmed, and a job left with nothing is deleted.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:slots, KEYS[3] {ns:job}:live,
-- KEYS[4] {ns:job}:history
-- ARGV: older_than_ms, after (ZRANGEBYSCORE min: '-inf' or '(<slot>'), batch
-- Reply: {deleted, scanned, last scanned slot or '', empty (1 when the job
-- has no keys left)}.
local state, slots, live, history = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local batch = tonumber(ARGV[3])

local now = store_now()
local cutoff = now - tonumber(ARGV[1])
local cutoff_s = string.format('%.0f', cutoff)

local cands = redis.call('ZRANGEBYSCORE', slots, ARGV[2], '(' .. cutoff_s, 'LIMIT', 0, batch)
local deleted = 0
for _, s in ipairs(cands) do
  local raw = redis.call('HGET', state, s)
  local drop = true
  if raw then
    local ok, run = pcall(cjson.decode, raw)
    -- Unreadable state is kept: pruning must never free a slot it cannot read.
    drop = ok and type(run) == 'table' and (run.status ~= 'running' or run.lease_until < cutoff)
  end
  if drop then
    redis.call('HDEL', state, s)
    redis.call('HDEL', live, s)
    redis.call('ZREM', slots, s)
    if raw then
      deleted = deleted + 1
    end
  end
end

local empty = 0
if #cands < batch then
  redis.call('XTRIM', history, 'MINID', cutoff_s)
  if redis.call('EXISTS', state) == 0 and redis.call('XLEN', history) == 0 then
    redis.call('DEL', history, live, slots)
    empty = 1
  end
end
return {deleted, #cands, cands[#cands] or '', empty}
