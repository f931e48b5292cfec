-- unreplace.lua: undoes replace.lua after the durable write of the
-- replacement provably failed: the replaced orderId holds its use (and its
-- campaign code) again and the new orderId is forgotten, its code freed (the
-- client may retry it). The counts do not move, as they did not in
-- replace.lua.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
-- KEYS[6] -> voucher:{CODE}:held       string int: orders holding a use (lib/held.lua)
-- KEYS[7] -> voucher:{CODE}:heldscan   set: orderIds counted while heldinit.lua counts
-- KEYS[8] -> voucher:{CODE}:budget     hash: the money budget (lib/budget.lua)
-- (KEYS[2], the users hash, is passed for the common key layout and not used.)
--
-- ARGV[1] -> new orderId
-- ARGV[2] -> replaced orderId
--
-- Returns 1 when it undid the replacement, 0 when the two orders are not in
-- the state replace.lua left them in (same customer, new held or pending,
-- replaced released), or the voucher is not loaded.
--
-- include: hold, codes, held, budget
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local new = redis.call('HGET', KEYS[3], ARGV[1])
local old = redis.call('HGET', KEYS[3], ARGV[2])
if not new or not old then
  return 0
end
local nstate, ncust = holdHead(new)
local ostate, ocust = holdHead(old)
if (nstate ~= HELD and nstate ~= PENDING) or ostate ~= RELEASED or ncust ~= ocust then
  return 0
end
redis.call('HSET', KEYS[3], ARGV[2], holdAs(old, HELD))
redis.call('HDEL', KEYS[3], ARGV[1])
countHeld(KEYS[6], KEYS[7], ARGV[1], true, false)
countHeld(KEYS[6], KEYS[7], ARGV[2], false, true)
countBudget(KEYS[8], new, true, false)
countBudget(KEYS[8], old, false, true)
freeCode(KEYS[5], holdCode(new), ARGV[1])
local ocode = holdCode(old)
if ocode then
  redis.call('HSET', KEYS[5], ocode, ARGV[2])
end
redis.call('INCR', KEYS[4])
return 1
