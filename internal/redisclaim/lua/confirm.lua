-- anarchon redis: confirm a write before WAIT (backend.redis.waitReplicas).
--
-- WAIT counts the replicas that hold every write the calling connection
-- made. The write to confirm may have gone out on another connection (a
-- claim re-sent after its answer was lost finds the first copy's write),
-- or to a master that has died since (the write lost with it). So this
-- script checks that the write is here, on this master, and then writes
-- on this connection itself: the SET and DEL of a scratch key of the job,
-- which leaves nothing behind. A WAIT sent after it on the same connection
-- counts the replicas that hold the confirmed write (replication is one
-- ordered stream).
--
-- KEYS[1] the key holding the write: a hash (the lease strategy's :state)
--         or a stream (a claim-only strategy's :runs)
-- KEYS[2] the job's scratch key ({ns:job}:confirm)
-- ARGV: kind ('hash' | 'stream'), the hash field (the slot) or the stream
--       entry ID, the token the write carries, and settled ('1': the hash's
--       run must be finished or interrupted, as Finish leaves it)
-- Reply: 'ok', or 'gone' (no such write here).
local kind, at, token = ARGV[1], ARGV[2], ARGV[3]

local found = false
if kind == 'hash' then
  local raw = redis.call('HGET', KEYS[1], at)
  if raw then
    local ok, run = pcall(cjson.decode, raw)
    found = ok and type(run) == 'table' and run.token == token
      and (ARGV[4] ~= '1' or run.status ~= 'running')
  end
else
  local e = redis.call('XRANGE', KEYS[1], at, at)
  if #e == 1 then
    local f = e[1][2]
    for i = 1, #f, 2 do
      if f[i] == 'token' then
        found = f[i + 1] == token
        break
      end
    end
  end
end
if not found then
  return 'gone'
end
redis.call('SET', KEYS[2], '1')
redis.call('DEL', KEYS[2])
return 'ok'
