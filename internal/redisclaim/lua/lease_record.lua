-- anarchon redis lease: record the outcome of a slot no attempt ran (a
-- note: skipped, missed or unknown; docs/spec.md#s6-outcomes), only where
-- the job's state holds nothing of the slot: a claim or an earlier note
-- wins. The note is the run's state, as a claim's run is: the claim script
-- finds it and answers done, and every fenced write finds no token of its
-- own in it. finished_at is store time.
--
-- KEYS[1] {ns:job}:state, KEYS[2] {ns:job}:notes, KEYS[3] {ns:job}:history
-- ARGV: slot, status, reason, held_by (0: none), instance, history_maxlen,
--       indexed ("1" when the caller added the job to the namespace's index
--       of jobs just before)
-- Reply: {'recorded'}, {'exists'} (the slot has a run or a note), or
-- {'index'}: the note would create the job's state, and the index must
-- name a job before any run of it exists (as the claim's 'index').
local state, notes, history = KEYS[1], KEYS[2], KEYS[3]
local slot = ARGV[1]

if redis.call('HEXISTS', state, slot) == 1 then
  return {'exists'}
end
if ARGV[7] ~= '1' and redis.call('EXISTS', state) == 0 then
  return {'index'}
end
local now = store_now()
local held_by = tonumber(ARGV[4])
if held_by == 0 then
  held_by = nil
end
redis.call('XADD', history, 'MAXLEN', '~', ARGV[6], '*', 'event', 'noted',
  'slot', slot, 'status', ARGV[2], 'reason', ARGV[3], 'instance', ARGV[5])
-- Settled at once: indexed in :notes (not :slots, so that a listing of
-- runs or of notes reads only its own index).
redis.call('ZADD', notes, slot, slot)
redis.call('HSET', state, slot, cjson.encode({
  status = ARGV[2], reason = ARGV[3], held_by = held_by, instance = ARGV[5], finished_at = now,
}))
return {'recorded'}
