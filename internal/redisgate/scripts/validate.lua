-- validate.lua: answers what reserve.lua would answer for one orderId, and
-- writes nothing (read-only: run with EVALSHA_RO-safe commands only).
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
-- KEYS[5] -> voucher:{CODE}:budget     hash: the occurrences' counts (lib/budget.lua)
--
-- ARGV[1] -> orderId, or '' to leave the orderId checks out
-- ARGV[2] -> customerId, compared as a string, as in reserve.lua
-- ARGV[3] -> perUserLimit
-- ARGV[4] -> the campaign code presented, '' for a voucher
-- ARGV[5] -> the quota per occurrence as in reserve.lua ('' none)
-- ARGV[6] -> the occurrence's windowMs ('' none)
-- ARGV[7] -> the money budget as in reserve.lua: '' none, 'reject' or 'clip'
-- ARGV[8] -> the discount the order would get
--
-- Returns the statuses of reserve.lua, in the same order of checks:
--   {1, remaining}        a use would be taken
--   {2, remaining, hold}  replay: orderId holds a use (H or P) for this customer and code
--   {3, remaining, hold}  conflict: orderId is known with another customer or code
--   {4, remaining, hold}  released: orderId was released
--   {5, 0}                not loaded
--   {6, remaining}        quota held
--   {7, remaining}        sold out
--   {9, remaining}        code used by another order
--   {11, remaining, left} budget: the discount does not fit what is left
--   {1, remaining, '', discount}  a use would be taken with the discount
--                         clipped to what is left of the budget
--   {12, remaining}       window full
--
-- include: known_order, take_checks, budget
local orderID = ARGV[1] ~= '' and ARGV[1] -- false: no orderId checks
local known, r = knownOrder(KEYS[1], KEYS[3], orderID, ARGV[2], ARGV[4])
if known then
  return known
end
local refused = refuseTake(KEYS[2], KEYS[4], ARGV[2], ARGV[3], ARGV[4], r)
if refused then
  return refused
end
local clipped = nil
if ARGV[7] ~= '' then
  local left = budgetLeft(KEYS[5])
  if not left then
    return {5, 0}
  end
  local want = tonumber(ARGV[8])
  local d = fitBudget(left, want, ARGV[7] == 'clip')
  if not d then
    return {11, r, tostring(left)}
  end
  if d ~= want then
    clipped = tostring(d)
  end
end
if ARGV[5] ~= '' and (ARGV[6] == '' or windowHeld(KEYS[5], ARGV[6]) >= tonumber(ARGV[5])) then
  return {12, r}
end
if clipped then
  return {1, r, '', clipped}
end
return {1, r}
