-- The claim script of the earlier format, which indexed a run in :slots when
-- it claimed it (lua/lease_prelude.lua and lua/lease_claim.lua as they were):
-- the tests run it beside the current scripts, as instances of the earlier
-- version would during a rolling upgrade.

-- anarchon redis lease: helpers every lease script starts with (the Go side
-- prepends this file to each of them).

-- store_now is Redis TIME in milliseconds: the store time of every decision.
local function store_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- decode_run decodes the stored run of slot; on unreadable state it returns
-- nil and the error reply the script must return.
local function decode_run(raw, state, slot)
  local ok, run = pcall(cjson.decode, raw)
  if not ok or type(run) ~= 'table' then
    return nil, redis.error_reply('ERR anarchon: unreadable state of slot ' .. slot .. ' in ' .. state)
  end
  return run
end

-- owned_run returns the run of slot when it is running under token; else
-- nil and the reply to return: {'fenced'}, or the error of unreadable state.
local function owned_run(state, slot, token)
  local raw = redis.call('HGET', state, slot)
  if not raw then
    return nil, {'fenced'}
  end
  local run, err = decode_run(raw, state, slot)
  if not run then
    return nil, err
  end
  if run.status ~= 'running' or run.token ~= token then
    return nil, {'fenced'}
  end
  return run
end


-- anarchon redis lease: the claim (docs/spec.md#s3-1), the same decision table as
-- claim.Decide, decided atomically: nothing else runs while a script runs.
--
-- KEYS[1] {ns:job}:state    hash   slot -> run (JSON)
-- KEYS[2] {ns:job}:slots    zset   slot (score) -> slot: the job's runs by slot
-- KEYS[3] {ns:job}:live     hash   slot -> lease_until, for every running run
-- KEYS[4] {ns:job}:history  stream claimed/takeover/interrupted/... events
-- ARGV: slot, token, instance, max_late_ms, lease_ms, max_attempts,
--       overlap ("skip" | "allow"), history_maxlen, indexed ("1" when the
--       caller added the job to the namespace's index of jobs just before)
-- Reply: {outcome, attempt, now_ms, lease_until_ms, event}: outcome is won,
-- running, done, late or overlap, with 0 where claim.Decide leaves a field
-- zero; event is the history event written (claimed, takeover,
-- interrupted), or '' when the decision wrote nothing. Outcome 'index'
-- asks the caller to index the job and send the claim again: the claim
-- would create the job's state, and the index must name a job before any
-- run of it exists.
local state, slots, live, history = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local slot, token, instance = ARGV[1], ARGV[2], ARGV[3]
local slot_ms = tonumber(slot)
local max_late, lease = tonumber(ARGV[4]), tonumber(ARGV[5])
local max_attempts = tonumber(ARGV[6])
local skip = ARGV[7] == 'skip'
local maxlen = ARGV[8]
local indexed = ARGV[9] == '1'

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

local function event(ev, attempt, tok, inst)
  redis.call('XADD', history, 'MAXLEN', '~', maxlen, '*',
    'event', ev, 'slot', slot, 'attempt', attempt, 'token', tok, 'instance', inst)
end

-- won(attempt): a fresh attempt held by the caller. The run's state is
-- written last, so that an error on the way leaves no half-made claim.
local function grant(attempt, ev)
  local until_ms = now + lease
  event(ev, attempt, token, instance)
  redis.call('ZADD', slots, slot, slot)
  redis.call('HSET', live, slot, until_ms)
  redis.call('HSET', state, slot, cjson.encode({
    status = 'running', attempt = attempt, instance = instance, token = token,
    started_at = now, lease_until = until_ms,
  }))
  return {'won', attempt, now, until_ms, ev}
end

local raw = redis.call('HGET', state, slot)
if not raw then
  if now - slot_ms > max_late then
    return {'late', 0, now, 0, ''}
  end
  if skip and other_live() then
    return {'overlap', 0, now, 0, ''}
  end
  -- A job with state is in the index: its first claim indexed it, and
  -- Prune removes a job from the index only once its keys are gone.
  if not indexed and redis.call('EXISTS', state) == 0 then
    return {'index', 0, now, 0, ''}
  end
  return grant(1, 'claimed')
end

local run, err = decode_run(raw, state, slot)
if not run then
  return err
end
if run.status == 'running' and run.token == token then
  return {'won', run.attempt, now, run.lease_until, ''} -- my own claim, re-sent
end
if run.status ~= 'running' then
  return {'done', 0, now, 0, ''}
end
if run.lease_until >= now then
  return {'running', run.attempt, now, run.lease_until, ''}
end
if run.attempt >= max_attempts or (skip and other_live()) then
  event('interrupted', run.attempt, run.token, run.instance)
  redis.call('HDEL', live, slot)
  run.status, run.finished_at = 'interrupted', now
  redis.call('HSET', state, slot, cjson.encode(run))
  return {'done', run.attempt, now, 0, 'interrupted'}
end
return grant(run.attempt + 1, 'takeover')
