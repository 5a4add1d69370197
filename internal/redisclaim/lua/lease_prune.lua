-- anarchon redis lease: forget old runs and notes of one job, one batch at
-- a time. A run goes when its slot is older than cutoff = now - older_than
-- and it is finished or its lease ended before the cutoff; a live lease
-- ends after now, so a live run never goes. A note (lease_record.lua) is
-- final and goes like a finished run. The batches walk one index each
-- call (ARGV[4]): first :slots, the settled runs (and the running ones an
-- earlier version indexed when it claimed them), then :notes. The last
-- batch of :notes also looks at the runs of :live older than the cutoff
-- (the running runs, among them a dead runner's that nobody took over),
-- trims the history events older than the cutoff, and deletes a job left
-- with nothing.
--
-- The first batch of :slots also repairs the indexes. An earlier version
-- indexed a run when it claimed it, and so interrupts a run without
-- indexing it: a run claimed by this version and interrupted by an earlier
-- one (a rolling upgrade, a downgrade) is in no index, and status and
-- Prune would never see it. When :state holds more runs than the indexes
-- (:slots, :live, :notes), each run missing from all of them is added to
-- :slots, or to :notes where it is a note. An earlier version's repair
-- adds this version's notes to :slots: they are then in two indexes,
-- which the count, ListRuns and Prune allow for.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:slots, KEYS[3] {ns:job}:live,
-- KEYS[4] {ns:job}:history, KEYS[5] {ns:job}:notes
-- ARGV: older_than_ms, after (ZRANGEBYSCORE min: '-inf' or '(<slot>'),
--       batch, index ('slots' or 'notes': the index this call walks)
-- Reply: {deleted, scanned, last scanned slot or '', empty (1 when the job
-- has no keys left), reindexed (runs added to an index by the repair)}.
local state, slots, live, history, notes = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local batch = tonumber(ARGV[3])
local walk = ARGV[4] == 'notes' and notes or slots

local now = store_now()
local cutoff = now - tonumber(ARGV[1])
local cutoff_s = string.format('%.0f', cutoff)

-- is_note reports whether raw is the state of a noted slot.
local function is_note(raw)
  local ok, run = pcall(cjson.decode, raw)
  local st = ok and type(run) == 'table' and run.status
  return st == 'skipped' or st == 'missed' or st == 'unknown'
end

local reindexed = 0
if walk == slots and ARGV[2] == '-inf' then
  -- A running run of an earlier version is in :slots and :live, and a
  -- note that an earlier version's repair indexed is in :slots and :notes
  -- (ZINTERCARD: Redis 7.0, which the lease strategy needs): count each once.
  local indexed = redis.call('ZCARD', slots) + redis.call('ZCARD', notes)
    - redis.call('ZINTERCARD', 2, slots, notes)
  for _, s in ipairs(redis.call('HKEYS', live)) do
    if not redis.call('ZSCORE', slots, s) then
      indexed = indexed + 1
    end
  end
  if redis.call('HLEN', state) > indexed then
    for _, s in ipairs(redis.call('HKEYS', state)) do
      if not redis.call('ZSCORE', slots, s) and not redis.call('ZSCORE', notes, s)
          and redis.call('HEXISTS', live, s) == 0 then
        if is_note(redis.call('HGET', state, s)) then
          redis.call('ZADD', notes, s, s)
        else
          redis.call('ZADD', slots, s, s)
        end
        reindexed = reindexed + 1
      end
    end
  end
end

local deleted = 0
-- prune deletes the run of slot s if it goes.
local function prune(s)
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
    redis.call('ZREM', notes, s)
    if raw then
      deleted = deleted + 1
    end
  end
end

local cands = redis.call('ZRANGEBYSCORE', walk, ARGV[2], '(' .. cutoff_s, 'LIMIT', 0, batch)
for _, s in ipairs(cands) do
  prune(s)
end

local empty = 0
if #cands < batch and walk == notes then
  for _, s in ipairs(redis.call('HKEYS', live)) do
    if tonumber(s) < cutoff then
      prune(s)
    end
  end
  redis.call('XTRIM', history, 'MINID', cutoff_s)
  if redis.call('EXISTS', state) == 0 and redis.call('XLEN', history) == 0 then
    redis.call('DEL', history, live, slots, notes)
    empty = 1
  end
end
return {deleted, #cands, cands[#cands] or '', empty, reindexed}
