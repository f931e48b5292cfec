-- adjust.lua: adds delta to the remaining uses of a loaded voucher (after a
-- limit change), sets its money budget's cap, and refreshes the expiry of
-- its keys.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: only its expiry changes here
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId: only its expiry changes here
-- KEYS[6] -> voucher:{CODE}:held       string int: only its expiry changes here
-- KEYS[7] -> voucher:{CODE}:heldscan   set: only its expiry changes here
-- KEYS[8] -> voucher:{CODE}:budget     hash cap, held (lib/budget.lua): cap set
--                                      to ARGV[3] when it exists
--
-- ARGV[1] -> delta, may be negative
-- ARGV[2] -> expireAt, unix milliseconds; "0" keeps the current expiries
-- ARGV[3] -> the budget's amount, '' for a voucher without one
--
-- Returns:
--   {1, remaining} the remaining uses after the change
--   {0, 0}         the voucher is not loaded (nothing changed)
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0}
end
local r = redis.call('INCRBY', KEYS[1], ARGV[1])
if ARGV[3] ~= '' and redis.call('EXISTS', KEYS[8]) == 1 then
  redis.call('HSET', KEYS[8], 'cap', ARGV[3])
end
if ARGV[2] ~= '0' then
  for i = 1, 8 do
    redis.call('PEXPIREAT', KEYS[i], ARGV[2])
  end
end
return {1, r}
