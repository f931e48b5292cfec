-- inspect.lua: reads a voucher's whole gate state in one consistent step,
-- for reconciliation and tests. Read-only.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
--
-- Returns:
--   {0}                                  the voucher is not loaded
--   {1, remaining, users flat, orders flat, codes flat} where the flat
--                                        lists alternate field and value (HGETALL)
local rem = redis.call('GET', KEYS[1])
if not rem then
  return {0}
end
return {1, tonumber(rem), redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4])}
