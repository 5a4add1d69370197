-- anarchon redis lease: the claim (docs/spec.md#s3-1), the same decision table as
-- claim.Decide, decided atomically: nothing else runs while a script runs.
--
-- KEYS[1] {ns:job}:state    hash   slot -> run (JSON)
-- KEYS[2] {ns:job}:slots    zset   slot (score) -> slot: the job's settled
--                                  runs (finished, interrupted) by slot
-- KEYS[3] {ns:job}:live     hash   slot -> lease_until, for every running run
-- KEYS[4] {ns:job}:history  stream claimed/takeover/interrupted/... events
-- ARGV: slot, token, instance, max_late_ms, lease_ms, max_attempts,
--       overlap ("skip" | "allow"), history_maxlen, indexed ("1" when the
--       caller added the job to the namespace's index of jobs just before)
-- Reply: {outcome, attempt, now_ms, lease_until_ms, event, holder}: outcome
-- is won, running, done, late or overlap, with 0 where claim.Decide leaves
-- a field zero; event is the history event written (claimed, takeover,
-- interrupted), or '' when the decision wrote nothing; holder is the
-- instance that holds the run (running) or ran it (done, not
-- interrupted nor noted), else ''. Outcome 'index'
-- asks the caller to index the job and send the claim again: the claim
-- would create the job's state, and the index must name a job before any
-- run of it exists.
--
-- A won claim writes three keys: the event, the lease in :live and the run.
-- The run enters :slots only when it settles (lease_finish.lua, or the
-- interruption below), and until then :live lists it: a ZADD into a small
-- sorted set (listpack-encoded, up to 128 members by default) walks the
-- whole set, and was the dearest write of a claim. The first claim and the
-- takeover share one won path, written out once.
local state, live, history = KEYS[1], KEYS[3], KEYS[4]
local slot, token, instance = ARGV[1], ARGV[2], ARGV[3]
local skip = ARGV[7] == 'skip'

-- Store time, read here, after every earlier claim of the job has run.
local now = store_now()

-- Is another run of the job running with lease_until >= now?
local function other_live()
  local l = redis.call('HGETALL', live)
  for i = 1, #l, 2 do
    if l[i] ~= slot and tonumber(l[i + 1]) >= now then
      return true
    end
  end
  return false
end

local attempt, event = 1, 'claimed'
local raw = redis.call('HGET', state, slot)
if raw then
  local run, err = decode_run(raw, state, slot)
  if not run then
    return err
  end
  if run.status == 'running' and run.token == token then
    return {'won', run.attempt, now, run.lease_until, '', ''} -- my own claim, re-sent
  end
  if run.status ~= 'running' then
    -- Nobody ran an interrupted run to its end, nor a noted slot (a note:
    -- skipped, missed or unknown, lease_record.lua): no holder.
    local st = run.status
    if st == 'interrupted' or st == 'skipped' or st == 'missed' or st == 'unknown' then
      return {'done', 0, now, 0, '', ''}
    end
    return {'done', 0, now, 0, '', run.instance}
  end
  if run.lease_until >= now then
    return {'running', run.attempt, now, run.lease_until, '', run.instance}
  end
  if run.attempt >= tonumber(ARGV[6]) or (skip and other_live()) then
    redis.call('XADD', history, 'MAXLEN', '~', ARGV[8], '*', 'event', 'interrupted',
      'slot', slot, 'attempt', run.attempt, 'token', run.token, 'instance', run.instance)
    -- Settled: out of :live, into :slots.
    redis.call('HDEL', live, slot)
    redis.call('ZADD', KEYS[2], slot, slot)
    run.status, run.finished_at = 'interrupted', now
    redis.call('HSET', state, slot, cjson.encode(run))
    return {'done', run.attempt, now, 0, 'interrupted', ''}
  end
  attempt, event = run.attempt + 1, 'takeover'
else
  if now - tonumber(slot) > tonumber(ARGV[4]) then
    return {'late', 0, now, 0, '', ''}
  end
  if skip and other_live() then
    return {'overlap', 0, now, 0, '', ''}
  end
  -- A job with state is in the index: its first claim indexed it, and
  -- Prune removes a job from the index only once its keys are gone.
  if ARGV[9] ~= '1' and redis.call('EXISTS', state) == 0 then
    return {'index', 0, now, 0, '', ''}
  end
end

-- won(attempt): a fresh attempt held by the caller. The run's state is
-- written last, so that an error on the way leaves no half-made claim.
local until_ms = now + tonumber(ARGV[5])
redis.call('XADD', history, 'MAXLEN', '~', ARGV[8], '*', 'event', event,
  'slot', slot, 'attempt', attempt, 'token', token, 'instance', instance)
redis.call('HSET', live, slot, until_ms)
redis.call('HSET', state, slot, cjson.encode({
  status = 'running', attempt = attempt, instance = instance, token = token,
  started_at = math.max(now, tonumber(slot)), lease_until = until_ms,
}))
return {'won', attempt, now, until_ms, event, ''}
