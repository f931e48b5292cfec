-- rediscount.lua: sets the discount recorded in an orderId's hold (H, P or
-- C) and moves the money budget's held amount by the difference, in one
-- step: the hold keeps its use throughout, so no other order can take it
-- while the discount is corrected (a stack's member whose discount the
-- store clipped otherwise than the gate). A released marker or an unknown
-- orderId is left as it is; an absent budget stays absent.
--
-- KEYS[1] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[2] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[3] -> voucher:{CODE}:budget     hash cap, held (lib/budget.lua)
--
-- ARGV[1] -> orderId
-- ARGV[2] -> the discount, minor units (a non-negative integer)
--
-- Returns:
--   1 if the hold's discount changed
--   0 otherwise
--
-- include: hold, keys
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored or not holdsUse(holdState(stored)) then
  return 0
end
local before = holdDiscount(stored)
local after = tonumber(ARGV[2])
if not before or before == after then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], holdWithDiscount(stored, ARGV[2]))
if redis.call('HEXISTS', KEYS[3], 'cap') == 1 then
  redis.call('HINCRBY', KEYS[3], 'held', after - before)
end
bumpVersion(KEYS[2], KEYS[1])
return 1
