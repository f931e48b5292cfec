-- raise.lua: raises the gate's money budget counter and the counters of the
-- occurrences of a voucher's windows to at least what PostgreSQL's held
-- redemptions weigh, never lowers one (reconciliation: a counter below the
-- truth would let the gate give out more than the store allows; one above
-- only gives out less). Counters the gate lost while its orders stayed
-- (an evicted or deleted budget hash) are put back this way.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left (loaded check, expiry)
-- KEYS[2] -> voucher:{CODE}:budget     hash: cap, held, w:<windowMs> (lib/budget.lua)
--
-- ARGV[1] -> the discounts PostgreSQL's held redemptions hold ('' leaves
--            the budget alone; a voucher without a cap has none)
-- ARGV[2 .. end] -> windowMs, count pairs: the uses held per occurrence
--
-- Returns the number of counters raised; -1 when the voucher is not loaded.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local raised = 0
if ARGV[1] ~= '' and redis.call('HEXISTS', KEYS[2], 'cap') == 1 then
  local held = tonumber(redis.call('HGET', KEYS[2], 'held') or '0')
  if held < tonumber(ARGV[1]) then
    redis.call('HSET', KEYS[2], 'held', ARGV[1])
    raised = raised + 1
  end
end
for i = 2, #ARGV - 1, 2 do
  local field = 'w:' .. ARGV[i]
  local n = tonumber(redis.call('HGET', KEYS[2], field) or '0')
  if n < tonumber(ARGV[i + 1]) then
    redis.call('HSET', KEYS[2], field, ARGV[i + 1])
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
