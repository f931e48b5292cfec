-- reserve.lua: checks and takes one use of a voucher for one orderId, in one
-- atomic step (idempotency by orderId, the campaign code, per-customer quota,
-- remaining count).
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
--                                      (a campaign's budget, CODE its id)
-- KEYS[6] -> voucher:{CODE}:held       string int: orders holding a use (lib/held.lua)
-- KEYS[7] -> voucher:{CODE}:heldscan   set: orderIds counted while heldinit.lua counts
-- KEYS[8] -> voucher:{CODE}:void       hash orderId -> token of its voided attempt (void.lua)
--
-- ARGV[1] -> orderId
-- ARGV[2] -> customerId (voucher.ValidCustomerID: never '|'); compared as a string; an int64 does
--            not fit a Lua number
-- ARGV[3] -> perUserLimit
-- ARGV[4] -> encoded hold to store (lib/hold.lua), held (H), or pending (P) in
--            Kafka mode; its code field is ARGV[5]
-- ARGV[5] -> the campaign code presented, '' for a voucher
-- ARGV[6] -> this attempt's token (lib/void.lua)
--
-- Returns {status, remaining} or {status, remaining, stored hold or version}:
--   {1, remaining, ver}   taken: a use was taken; remaining is after the take,
--                         ver the version after it
--   {2, remaining, hold}  replay: orderId holds a use (H or P) for this customer
--                         and this code
--   {3, remaining, hold}  conflict: orderId is known with another customer or
--                         another campaign code
--   {4, remaining, hold}  released: orderId was released (R marker)
--   {5, 0}                not loaded: the remaining key is absent
--   {6, remaining}        quota held: the customer holds perUserLimit uses
--   {7, remaining, ver}   sold out: no use left; ver is the version, '' if absent
--   {9, remaining}        code used: the campaign code is held by another order
--   {10, remaining}       voided: this attempt of an unknown orderId was voided
-- remaining is -1 where it is unknown (a known orderId of an unloaded voucher).
-- The version lets the caller's sold-out cache keep its copy of the orders
-- when nothing changed.
--
-- include: known_order, take_checks, keys, held, void
local known, r = knownOrder(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[5])
if known then
  return known
end
if voided(KEYS[8], ARGV[1], ARGV[6]) then
  return {10, r}
end
local refused = refuseTake(KEYS[2], KEYS[5], ARGV[2], ARGV[3], ARGV[5], r)
if refused then
  if refused[1] == 7 then
    -- Sold out: with the version, for the caller's sold-out cache.
    refused[3] = redis.call('GET', KEYS[4]) or ''
  end
  return refused
end

r = redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
countHeld(KEYS[6], KEYS[7], ARGV[1], false, true)
local ver = redis.call('INCR', KEYS[4])
local last = 4
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[5], ARGV[1])
  last = 5
end

-- The hashes may have just been created (a voucher loaded with no holds, or
-- whose last customer gave everything back), and the version too (a voucher
-- loaded before versions existed): give them the expiry of the remaining key
-- so that an old sale leaves Redis as a whole.
shareExpiry(KEYS[1], unpack(KEYS, 2, last))
return {1, r, tostring(ver)}
