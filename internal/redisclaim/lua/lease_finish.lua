-- anarchon redis lease: record a run's result (docs/spec.md#s4), only where the run
-- is running under the caller's token. finished_at is store time, never
-- before started_at (a run claimed ahead starts at its slot).
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:slots, KEYS[3] {ns:job}:live,
-- KEYS[4] {ns:job}:history
-- ARGV: slot, token, status, exit_code ('' for none), output_tail, history_maxlen
-- Reply: {'ok'}; {'ok', 'resent'} when the run already holds exactly this
-- result from this token (a Finish re-sent after its answer was lost);
-- {'fenced'} otherwise.
local state, slots, live, history = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local slot, token, status, tail = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
local exit_code = nil
if ARGV[4] ~= '' then
  exit_code = tonumber(ARGV[4])
end

local raw = redis.call('HGET', state, slot)
if not raw then
  return {'fenced'}
end
local run, err = decode_run(raw, state, slot)
if not run then
  return err
end
if run.token == token and run.status == status and run.status ~= 'running'
    and run.exit_code == exit_code and (run.output_tail or '') == tail then
  return {'ok', 'resent'}
end
if run.status ~= 'running' or run.token ~= token then
  return {'fenced'}
end
local now = store_now()
redis.call('XADD', history, 'MAXLEN', '~', ARGV[6], '*',
  'event', 'finished', 'slot', slot, 'attempt', run.attempt, 'token', token,
  'instance', run.instance, 'status', status)
-- Settled: out of :live, into :slots (the claim left it out; a run
-- claimed by an earlier version is already there, and ZADD changes nothing).
redis.call('HDEL', live, slot)
redis.call('ZADD', slots, slot, slot)
run.status, run.finished_at, run.exit_code, run.output_tail = status, math.max(now, tonumber(run.started_at) or 0), exit_code, tail
redis.call('HSET', state, slot, cjson.encode(run))
return {'ok'}
