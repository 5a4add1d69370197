-- anarchon redis claim-only strategies (stream-id, script): record the
-- outcome of a slot no attempt ran (a note: skipped, missed or unknown;
-- docs/spec.md#s6-outcomes) where the claims are decided, as a claim is
-- written, unless the slot has a claim or a note: atomically with every
-- claim of the job.
--
-- A note entry in :runs has the fields slot, token (empty), note (the
-- status), reason, held_by, instance, and (stream-id) at, the store time in
-- ms; a script entry's auto ID is the store time. slot and token come
-- first, as in a claim: the script claim's scan (script_claim.lua, of every
-- version) finds a note as a claim whose token is nobody's, and answers
-- lost; stream-id's XADD of the slot is refused and the claim reads the
-- note, nobody's token: lost.
--
-- stream-id: XADD <slot>-0. Where a later slot's claim or note came first,
-- nothing can ever be written at <slot>-0 and no claim of the slot can be
-- won: if the stream never held that entry, the note goes to :notes
-- instead (once per slot, the newest maxlen slots kept). If it may have
-- held it (trimmed, deleted), whether the slot was claimed is unknown and
-- nothing is written.
--
-- KEYS[1] {ns:job}:runs, KEYS[2] {ns:job}:notes (zset; stream-id)
-- ARGV: strategy ('stream-id' | 'script'), slot, status, reason, held_by,
--       instance, window_ms (script), maxlen (stream-id: of :runs and
--       :notes)
-- Reply: {'recorded', 'runs' | 'notes'}, {'exists'} (a claim or a note of
-- the slot), or {'forgotten'} (stream-id: nothing written, see above).
local runs, notes = KEYS[1], KEYS[2]
local slot = ARGV[2]
local now, from = store_window(tonumber(ARGV[7]))
local fields = {'slot', slot, 'token', '', 'note', ARGV[3], 'reason', ARGV[4],
  'held_by', ARGV[5], 'instance', ARGV[6]}

-- script: the slot's claim or note (a claim whose token is '') within the
-- window, found as script_claim.lua finds it.
if ARGV[1] == 'script' then
  if newest_claim(runs, slot, from) then
    return {'exists'}
  end
  redis.call('XADD', runs, 'MINID', '~', from, '*', unpack(fields))
  return {'recorded', 'runs'}
end

-- stream-id.
local id = slot .. '-0'
table.insert(fields, 'at')
table.insert(fields, string.format('%.0f', now))
local added = redis.pcall('XADD', runs, 'MAXLEN', '~', ARGV[8], id, unpack(fields))
if type(added) ~= 'table' or not added.err then
  return {'recorded', 'runs'}
end
if not string.find(added.err, 'equal or smaller', 1, true) then
  return added
end
if #redis.call('XRANGE', runs, id, id) > 0 then
  return {'exists'}
end

-- never_held reports whether the stream never held the entry <slot>-0:
-- not deleted (max-deleted-entry-id, Redis 7.0), and nothing ever removed
-- (entries-added, Redis 7.0) or newer than the stream's first entry
-- (trimming removes the oldest entries first).
local function never_held()
  local info = redis.call('XINFO', 'STREAM', runs)
  local f = {}
  for i = 1, #info, 2 do
    f[info[i]] = info[i + 1]
  end
  local ms = tonumber(slot)
  local deleted = f['max-deleted-entry-id']
  if deleted and ms <= tonumber(string.match(deleted, '^(%d+)') or '0') then
    return false
  end
  if f['entries-added'] and f['entries-added'] == f['length'] then
    return true
  end
  local first = f['first-entry']
  return type(first) == 'table' and ms > tonumber(string.match(first[1], '^(%d+)') or '0')
end

if not never_held() then
  return {'forgotten'}
end
if #redis.call('ZRANGEBYSCORE', notes, slot, slot, 'LIMIT', 0, 1) > 0 then
  return {'exists'}
end
redis.call('ZADD', notes, slot, cjson.encode({
  slot = slot, status = ARGV[3], reason = ARGV[4], held_by = ARGV[5], instance = ARGV[6],
  at = string.format('%.0f', now),
}))
redis.call('ZREMRANGEBYRANK', notes, 0, -(tonumber(ARGV[8]) + 1))
return {'recorded', 'notes'}
