-- anarchon redis lease: keepRuns (claim.CountPruner): forget the runs and
-- notes of one job that are not among its keep newest slots, whose slot
-- is older than cutoff = now - older_than, and that are not running (a
-- running run is never deleted, whatever its lease), at most batch of
-- them per call. History events are not deleted here: the stream is
-- capped, and Prune trims it by age.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:slots, KEYS[3] {ns:job}:live,
-- KEYS[4] {ns:job}:notes
-- ARGV: keep, older_than_ms, batch
-- Reply: {deleted, more (1 when the batch was full and more may go)}.
local state, slots, live, notes = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local keep, batch = tonumber(ARGV[1]), tonumber(ARGV[3])
local cutoff = store_now() - tonumber(ARGV[2])

-- Every slot of the job, runs and notes, is a field of :state.
local all = redis.call('HKEYS', state)
if #all <= keep then
  return {0, 0}
end
table.sort(all, function(a, b) return tonumber(a) > tonumber(b) end)

local deleted = 0
for i = keep + 1, #all do
  local s = all[i]
  if tonumber(s) < cutoff then
    local run = decode_run(redis.call('HGET', state, s), state, s)
    -- Unreadable state is kept: pruning must never free a slot it cannot read.
    if run and run.status ~= 'running' then
      if deleted == batch then
        return {deleted, 1}
      end
      redis.call('HDEL', state, s)
      redis.call('HDEL', live, s)
      redis.call('ZREM', slots, s)
      redis.call('ZREM', notes, s)
      deleted = deleted + 1
    end
  end
end
return {deleted, 0}
