-- held.lua (block): the held count of a voucher (voucher:{CODE}:held, the
-- number of orders holding a use: H, P or C in the orders hash). Every
-- script that changes whether an order holds a use calls countHeld for it,
-- in the same step, so that the count is exact whenever no script runs.
-- A voucher loaded before the count existed has no held key: countHeld
-- then leaves it absent, and heldinit.lua counts it in chunks.
--
-- While heldinit.lua counts, voucher:{CODE}:heldscan is a set holding
-- HELD_SCANNING (never an orderId: orderIds hold no '|') and every orderId
-- counted so far. An orderId is counted once, at its state when first
-- seen, by the chunk that reads it or by the script that changes it,
-- whichever comes first; from then on only its changes are added.
--
-- Expects nothing. Defines:
--   HELD_SCANNING                                the marker of a count under way
--   countHeld(heldKey, scanKey, orderId, was, is)
--     records that orderId went from holding a use (was, a boolean) to
--     holding one or not (is)
--   heldKeys(heldKey, scanKey)
--     which of the two keys exist (a number), as countHeldIn takes it;
--     counting creates or deletes neither, so a script that only counts
--     may read it once for several orders
--   countHeldIn(n, heldKey, scanKey, orderId, was, is)
--     countHeld with heldKeys's answer n
local HELD_SCANNING = '|'

local function heldKeys(heldKey, scanKey)
  -- One EXISTS tells both: EXISTS counts a key named twice twice, so this
  -- is 2 when held exists, plus 1 when scanKey does.
  return redis.call('EXISTS', heldKey, heldKey, scanKey)
end

local function countHeldIn(n, heldKey, scanKey, orderId, was, is)
  if was == is then
    return
  end
  if n < 2 then
    return
  end
  local now = is and 1 or 0
  if n == 3 and redis.call('SADD', scanKey, orderId) == 1 then
    -- Not counted yet: count its state from now on.
    if now == 1 then
      redis.call('INCR', heldKey)
    end
    return
  end
  redis.call('INCRBY', heldKey, now - (was and 1 or 0))
end

local function countHeld(heldKey, scanKey, orderId, was, is)
  if was == is then
    return
  end
  countHeldIn(heldKeys(heldKey, scanKey), heldKey, scanKey, orderId, was, is)
end
