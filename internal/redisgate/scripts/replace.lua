-- replace.lua: takes the use of a customer's held order for a new orderId in
-- one atomic step (a retry after a failed payment): the old order is marked
-- released, the new one stored, and neither the remaining count nor the
-- customer's count moves, so no other reservation can take the use between.
-- On a campaign's budget the new order's code is taken in the same step, and
-- the old order's code freed (they may be the same code) - unless the new
-- hold is pending (Kafka mode): then the old order keeps holding its code
-- until the replacement's event is acknowledged (commit.lua) or the new hold
-- is given back (release.lua, unreplace.lua). Until then PostgreSQL still
-- has the old order holding it, and an order that took it here could have
-- its event applied before the replacement's and refused.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
-- KEYS[6] -> voucher:{CODE}:held       string int: orders holding a use (lib/held.lua)
-- KEYS[7] -> voucher:{CODE}:heldscan   set: orderIds counted while heldinit.lua counts
-- KEYS[8] -> voucher:{CODE}:void       hash "orderId token" -> 1, voided attempts (void.lua)
-- KEYS[9] -> voucher:{CODE}:budget     hash: the money budget (lib/budget.lua)
--
-- ARGV[1] -> new orderId
-- ARGV[2] -> customerId (voucher.ValidCustomerID: never '|'), compared as a string
-- ARGV[3] -> encoded hold to store for the new orderId (as in reserve.lua)
-- ARGV[4] -> replaced orderId
-- ARGV[5] -> the campaign code the new order presents, '' for a voucher
-- ARGV[6] -> this attempt's token (lib/void.lua)
-- ARGV[7] -> the money budget as in reserve.lua: '' none, 'reject' or 'clip';
--            the new hold's discount is fitted against what is left once
--            the replaced hold's discount is given back
-- ARGV[8] -> the quota per occurrence as in reserve.lua ('' none); the
--            replaced hold's use counts in its own occurrence, given back
--
-- Returns, with the statuses of reserve.lua where they apply:
--   {1, remaining, ver}   replaced: ver is the version after it
--   {2, remaining, hold}  replay: the new orderId holds a use for this customer and code
--   {3, remaining, hold}  conflict: the new orderId is another customer's or code's
--   {4, remaining, hold}  released: the new orderId was released
--   {5, 0}                not loaded
--   {8, remaining}        not held: the replaced orderId is not this
--                         customer's held (H) hold: unknown, released,
--                         pending, or confirmed (C, confirm.lua)
--   {9, remaining}        code used: the new code is held by an order other
--                         than the replaced one
--   {10, remaining}       voided: this attempt of the new orderId was voided
--   {11, remaining, left} budget: the new discount does not fit (reserve.lua)
--   {1, remaining, ver, discount}  replaced with the discount clipped
--   {12, remaining}       window full (reserve.lua)
--
-- include: hold, known_order, codes, keys, held, void, budget
local known, r = knownOrder(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[5])
if known then
  return known
end
if voided(KEYS[8], ARGV[1], ARGV[6]) then
  return {10, r}
end

local old = redis.call('HGET', KEYS[3], ARGV[4])
if not old then
  return {8, r}
end
local ostate, ocust = holdHead(old)
if ostate ~= HELD or ocust ~= ARGV[2] then
  return {8, r}
end
if ARGV[5] ~= '' then
  local holder = redis.call('HGET', KEYS[5], ARGV[5])
  if holder and holder ~= ARGV[4] then
    return {9, r}
  end
end

local hold, clipped = ARGV[3], nil
if ARGV[7] ~= '' then
  local left = budgetLeft(KEYS[9])
  if not left then
    return {5, 0}
  end
  left = left + (holdDiscount(old) or 0)
  local want = holdDiscount(hold)
  local d = fitBudget(left, want, ARGV[7] == 'clip')
  if not d then
    return {11, r, tostring(left)}
  end
  if d ~= want then
    hold, clipped = holdWithDiscount(hold, tostring(d)), tostring(d)
  end
end

if ARGV[8] ~= '' then
  local w = holdWindow(hold)
  local n = w and windowHeld(KEYS[9], w)
  if n and holdWindow(old) == w then
    n = n - 1
  end
  if not n or n >= tonumber(ARGV[8]) then
    return {12, r}
  end
end

redis.call('HSET', KEYS[3], ARGV[4], holdAs(old, RELEASED))
redis.call('HSET', KEYS[3], ARGV[1], hold)
countHeld(KEYS[6], KEYS[7], ARGV[4], true, false)
countHeld(KEYS[6], KEYS[7], ARGV[1], false, true)
countBudget(KEYS[9], old, true, false)
countBudget(KEYS[9], hold, false, true)
if holdState(ARGV[3]) ~= PENDING then
  freeCode(KEYS[5], holdCode(old), ARGV[4])
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[5], ARGV[1])
  shareExpiry(KEYS[1], KEYS[5])
end
shareExpiry(KEYS[1], KEYS[9])
local ver = tostring(bumpVersion(KEYS[4], KEYS[1]))
if clipped then
  return {1, r, ver, clipped}
end
return {1, r, ver}
