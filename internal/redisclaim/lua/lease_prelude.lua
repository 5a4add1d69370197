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


-- move_lease moves the lease of slot's run, where it is running under
-- token, to store now + by, in live and in the run's state. It returns the
-- run and now; else nil and the reply to return (as owned_run).
local function move_lease(state, live, slot, token, by)
  local run, reply = owned_run(state, slot, token)
  if not run then
    return nil, reply
  end
  local now = store_now()
  run.lease_until = now + by
  redis.call('HSET', live, slot, run.lease_until)
  redis.call('HSET', state, slot, cjson.encode(run))
  return run, now
end
