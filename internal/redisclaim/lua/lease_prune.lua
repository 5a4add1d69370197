-- anarchon redis lease: forget old runs of one job, one batch at a time.
-- A run goes when its slot is older than cutoff = now - older_than and it is
-- finished or its lease ended before the cutoff; a live lease ends after
-- now, so a live run never goes. The batches walk :slots, the settled runs
-- (and the running ones an earlier version indexed when it claimed them);
-- the last batch also looks at the runs of :live older than the cutoff (the
-- running runs, among them a dead runner's that nobody took over), trims
-- the history events older than the cutoff, and deletes a job left with
-- nothing.
--
-- The first batch also repairs :slots. An earlier version indexed a run when
-- it claimed it, and so interrupts a run without indexing it: a run claimed
-- by this version and interrupted by an earlier one (a rolling upgrade, a
-- downgrade) is in neither :slots nor :live, and status and Prune would
-- never see it. When :state holds more runs than the two indexes, each run
-- missing from both is added to :slots.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:slots, KEYS[3] {ns:job}:live,
-- KEYS[4] {ns:job}:history
-- ARGV: older_than_ms, after (ZRANGEBYSCORE min: '-inf' or '(<slot>'), batch
-- Reply: {deleted, scanned, last scanned slot or '', empty (1 when the job
-- has no keys left), reindexed (runs added to :slots by the repair)}.
local state, slots, live, history = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local batch = tonumber(ARGV[3])

local now = store_now()
local cutoff = now - tonumber(ARGV[1])
local cutoff_s = string.format('%.0f', cutoff)

local reindexed = 0
if ARGV[2] == '-inf' then
  -- A running run of an earlier version is in both indexes: count it once.
  local indexed = redis.call('ZCARD', slots)
  for _, s in ipairs(redis.call('HKEYS', live)) do
    if not redis.call('ZSCORE', slots, s) then
      indexed = indexed + 1
    end
  end
  if redis.call('HLEN', state) > indexed then
    for _, s in ipairs(redis.call('HKEYS', state)) do
      if not redis.call('ZSCORE', slots, s) and redis.call('HEXISTS', live, s) == 0 then
        redis.call('ZADD', slots, s, s)
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
    if raw then
      deleted = deleted + 1
    end
  end
end

local cands = redis.call('ZRANGEBYSCORE', slots, ARGV[2], '(' .. cutoff_s, 'LIMIT', 0, batch)
for _, s in ipairs(cands) do
  prune(s)
end

local empty = 0
if #cands < batch then
  for _, s in ipairs(redis.call('HKEYS', live)) do
    if tonumber(s) < cutoff then
      prune(s)
    end
  end
  redis.call('XTRIM', history, 'MINID', cutoff_s)
  if redis.call('EXISTS', state) == 0 and redis.call('XLEN', history) == 0 then
    redis.call('DEL', history, live, slots)
    empty = 1
  end
end
return {deleted, #cands, cands[#cands] or '', empty, reindexed}
