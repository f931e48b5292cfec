-- release.lua: gives the use of an orderId back if it holds one (H, P or C),
-- and frees the campaign code it holds. Safe to repeat: a second call finds
-- no held orderId and returns 0.
--
-- A pending replacement's hold (P, its ninth field names the order it
-- replaced) released with "mark" also frees the code its replaced order kept
-- meanwhile (replace.lua): such a release follows the store's fence of the
-- replacement, which released the replaced order there too, or the store's
-- release of the applied replacement. "forget" leaves that code: a pending
-- hold is forgotten only when its orderId is another voucher's or
-- customer's order, whose event the consumer refuses, so the replaced order
-- keeps its code in PostgreSQL.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
-- KEYS[6] -> voucher:{CODE}:held       string int: orders holding a use (lib/held.lua)
-- KEYS[7] -> voucher:{CODE}:heldscan   set: orderIds counted while heldinit.lua counts
-- KEYS[8] -> voucher:{CODE}:budget     hash: the money budget (lib/budget.lua)
--
-- ARGV[1] -> orderId
-- ARGV[2] -> mode: "mark" keeps the orderId as released ("R|..."), so a late
--            retry cannot take a second use; "forget" deletes it, so the
--            client may retry the orderId (nothing durable was taken)
--
-- Returns:
--   1 if a use was given back
--   0 if nothing changed: the orderId is unknown or already released, or the
--     voucher is not loaded (the next load takes its state from PostgreSQL,
--     so nothing is written to an unloaded voucher, not even a marker)
--
-- include: hold, codes, keys, held, budget
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local stored = redis.call('HGET', KEYS[3], ARGV[1])
if not stored then
  return 0
end
local state, cust = holdHead(stored)
if not holdsUse(state) then
  return 0
end

redis.call('INCR', KEYS[1])
if redis.call('HINCRBY', KEYS[2], cust, -1) <= 0 then
  redis.call('HDEL', KEYS[2], cust)
end
if ARGV[2] == 'forget' then
  redis.call('HDEL', KEYS[3], ARGV[1])
else
  redis.call('HSET', KEYS[3], ARGV[1], holdAs(stored, RELEASED))
end
countHeld(KEYS[6], KEYS[7], ARGV[1], true, false)
countBudget(KEYS[8], stored, true, false)
freeCode(KEYS[5], holdCode(stored), ARGV[1])
if state == PENDING and ARGV[2] ~= 'forget' then
  local kept = keptCode(KEYS[3], KEYS[5], stored)
  if kept then
    redis.call('HDEL', KEYS[5], kept)
  end
end
bumpVersion(KEYS[4], KEYS[1])
return 1
