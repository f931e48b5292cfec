-- known_order.lua (block): the checks that come first in reserve.lua,
-- validate.lua and replace.lua, so that the three answer a known orderId and
-- an unloaded voucher alike. An orderId the orders hash knows never takes a
-- use, whatever the stock: it is answered from its hold.
--
-- include: hold
--
-- Expects the hold block. Defines:
--   knownOrder(remainingKey, ordersKey, orderId, customerId, code, rem)
--     orderId     the orderId asked for; false leaves the orderId checks out
--     customerId  the customerId presented, compared as a string
--     code        the campaign code presented, '' for a voucher
--     rem         the remaining key's value when the caller has it (false:
--                 absent); nil reads it
--   It returns the reply when these checks decide, else nil and the
--   remaining uses (a number):
--     {2, remaining, hold}  replay: orderId holds a use (or is unreadable) for
--                           this customer and this code
--     {3, remaining, hold}  conflict: orderId is known with another customer
--                           or another campaign code
--     {4, remaining, hold}  released: orderId was released (R)
--     {5, 0}                not loaded: the remaining key is absent
--   remaining is -1 where it is unknown (a known orderId of an unloaded
--   voucher).
--   knownHold(stored, customerId, code, rem)
--     the same checks for an orderId whose orders-hash value the caller
--     has read (stored: the encoded hold, false when absent); rem must be
--     given
local function knownHold(stored, customerId, code, rem)
  if stored then
    local state, cust = holdHead(stored)
    local r = tonumber(rem) or -1
    if cust ~= customerId or (holdCode(stored) or '') ~= code then
      return {3, r, stored}
    end
    if state == RELEASED then
      return {4, r, stored}
    end
    return {2, r, stored}
  end
  if not rem then
    return {5, 0}
  end
  return nil, tonumber(rem)
end

local function knownOrder(remainingKey, ordersKey, orderId, customerId, code, rem)
  if rem == nil then
    rem = redis.call('GET', remainingKey)
  end
  return knownHold(orderId and redis.call('HGET', ordersKey, orderId), customerId, code, rem)
end
