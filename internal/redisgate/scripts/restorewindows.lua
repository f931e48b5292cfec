-- restorewindows.lua: puts back counters of the occurrences of a voucher's windows
-- that the gate lost while its orders stayed (an evicted or deleted budget
-- hash): each named occurrence whose counter is absent gets PostgreSQL's
-- count of its held redemptions; a counter present is left alone, even if
-- it differs (reconciliation: it moves with every take and give-back, and a
-- difference seen by reads at two moments may be one in flight; raising it
-- then could make it count a use given back meanwhile, for good).
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left (loaded check, expiry)
-- KEYS[2] -> voucher:{CODE}:budget     hash: cap, held, w:<windowMs> (lib/budget.lua)
--
-- ARGV[1 .. end] -> windowMs, count pairs: the uses held per occurrence
--
-- Returns the number of counters put back; -1 when the voucher is not
-- loaded.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local raised = 0
for i = 1, #ARGV - 1, 2 do
  if redis.call('HSETNX', KEYS[2], 'w:' .. ARGV[i], ARGV[i + 1]) == 1 then
    raised = raised + 1
  end
end
if raised > 0 and redis.call('PTTL', KEYS[2]) == -1 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
return raised
