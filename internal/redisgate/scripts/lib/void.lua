-- void.lua (block): an attempt voided by void.lua takes nothing. An attempt
-- is one reservation call of one orderId, named by its token (the
-- millisecond of its hold's reservedAt); the service voids an attempt whose
-- call got no answer, and its script may still reach Redis after that. A
-- later attempt of the same orderId carries another token and is not
-- affected. Every voided attempt is kept (the field orderId, a space, its
-- token; orderIds hold no space): retries of one orderId may each be
-- voided before their scripts arrive, in any order.
--
-- Expects nothing. Defines:
--   voided(voidKey, orderId, token)  true when the attempt orderId/token was
--                                    voided; false for a token of '' (a
--                                    caller that names no attempt)
local function voided(voidKey, orderId, token)
  return token ~= nil and token ~= '' and redis.call('HEXISTS', voidKey, orderId .. ' ' .. token) == 1
end
