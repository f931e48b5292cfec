-- codes.lua (block): the codes hash of a campaign's budget
-- (voucher:{CODE}:codes, campaign code -> orderId holding it). A code is
-- held by the one held or pending order that presented it, and, while a
-- replacement is pending (Kafka mode, replace.lua), still by the order it
-- replaced: PostgreSQL has that order holding it until the replacement's
-- event is applied.
--
-- include: hold
--
-- Expects the hold block. Defines:
--   freeCode(codesKey, code, orderId)  drops code if orderId holds it; code
--                                      may be nil (a hold without a code)
--   keptCode(ordersKey, codesKey, v)   for a replacement's hold v: the code
--                                      its replaced order, released, still
--                                      holds, and that order's id; nil when
--                                      v replaced nothing or there is no
--                                      such code
local function freeCode(codesKey, code, orderId)
  if code and redis.call('HGET', codesKey, code) == orderId then
    redis.call('HDEL', codesKey, code)
  end
end

local function keptCode(ordersKey, codesKey, v)
  local replaced = holdReplaces(v)
  local old = replaced and redis.call('HGET', ordersKey, replaced)
  if not old or holdState(old) ~= RELEASED then
    return nil
  end
  local code = holdCode(old)
  if code and redis.call('HGET', codesKey, code) == replaced then
    return code, replaced
  end
  return nil
end
