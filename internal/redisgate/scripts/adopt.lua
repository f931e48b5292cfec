-- adopt.lua: records a hold the database has and the gate lost (found by
-- reconciliation): takes a use for it, even below zero remaining, only if the
-- orderId is unknown to the gate, or, when ARGV[5] is 'released', only if the
-- gate marks it released (R: a Kafka-mode replacement took over an order the
-- database has CONFIRMED, and the consumer kept that order). The gate then
-- hands out less, never more.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
-- KEYS[6] -> voucher:{CODE}:held       string int: orders holding a use (lib/held.lua)
-- KEYS[7] -> voucher:{CODE}:heldscan   set: orderIds counted while heldinit.lua counts
-- KEYS[8] -> voucher:{CODE}:budget     hash: the money budget (lib/budget.lua),
--                                      held raised by the hold's discount, even
--                                      past cap: the gate then hands out less
--
-- ARGV[1] -> orderId
-- ARGV[2] -> customerId, a string (voucher.ValidCustomerID: never '|')
-- ARGV[3] -> encoded hold to store (lib/hold.lua), held (H) or confirmed (C);
--            its code field is ARGV[4]
-- ARGV[4] -> the campaign code the order holds, '' for a voucher: the database
--            holds it for this order (at most one live order per code), so
--            it is this order's in the gate from now on
-- ARGV[5] -> '' to adopt an unknown orderId, 'released' to adopt over its
--            released marker
--
-- Returns:
--   1 if the hold was recorded and a use taken
--   0 if nothing changed: the orderId is not in the state ARGV[5] names (the
--     gate knows it, or does not mark it released), or the voucher is not
--     loaded (its next load reads the database, hold included)
--
-- include: keys, hold, held, budget
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local stored = redis.call('HGET', KEYS[3], ARGV[1])
if ARGV[5] == 'released' then
  if not stored or holdState(stored) ~= RELEASED then
    return 0
  end
elseif stored then
  return 0
end
redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
countHeld(KEYS[6], KEYS[7], ARGV[1], false, true)
countBudget(KEYS[8], ARGV[3], false, true)
redis.call('INCR', KEYS[4])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[4], ARGV[1])
end

-- As in reserve.lua: keys created here get the voucher's expiry.
shareExpiry(KEYS[1], unpack(KEYS, 2, 5))
return 1
