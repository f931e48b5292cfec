-- take_checks.lua (block): the checks of reserve.lua and validate.lua for an
-- orderId the gate does not know, in their order: the campaign code before
-- the customer's quota, the quota before the stock.
--
-- Expects nothing. Defines:
--   refuseTake(usersKey, codesKey, customerId, perUserLimit, code, r)
--     usersKey      voucher:{CODE}:users, customerId -> held count
--     codesKey      voucher:{CODE}:codes, campaign code -> orderId holding it
--     customerId    compared as a string
--     perUserLimit  a string, as passed in ARGV
--     code          the campaign code presented, '' for a voucher
--     r             the remaining uses, a number
--   It returns the reply refusing the take, nil when a use can be taken:
--     {9, r}  code used: an order holds the campaign code
--     {6, r}  quota held: the customer holds perUserLimit uses
--     {7, r}  sold out: no use left
--   refuseTakeHeld(codesKey, held, perUserLimit, code, r)
--     the same checks with the customer's held count (a number) read by
--     the caller
local function refuseTakeHeld(codesKey, held, perUserLimit, code, r)
  if code ~= '' and redis.call('HEXISTS', codesKey, code) == 1 then
    return {9, r}
  end
  if held >= tonumber(perUserLimit) then
    return {6, r}
  end
  if r <= 0 then
    return {7, r}
  end
  return nil
end

local function refuseTake(usersKey, codesKey, customerId, perUserLimit, code, r)
  if code ~= '' and redis.call('HEXISTS', codesKey, code) == 1 then
    return {9, r}
  end
  return refuseTakeHeld(codesKey, tonumber(redis.call('HGET', usersKey, customerId) or '0'), perUserLimit, '', r)
end
