-- budget.lua (block): a voucher's money budget in the gate,
-- voucher:{CODE}:budget, a hash: cap (budgetAmount, minor units) and held
-- (the discounts of the orders holding a use: H, P or C in the orders
-- hash). Absent for a voucher without a budget, and every script leaves an
-- absent one absent. The same hash keeps the quota per occurrence of a
-- voucher's windows: a field w:<windowMs> per occurrence, the orders
-- holding a use whose hold was taken in it (its windowMs field); created by
-- the first take of the occurrence (the hash then gets the voucher's
-- expiry from the caller). Every script that changes whether an order holds a use
-- calls countBudget for it next to countHeld (lib/held.lua), in the same
-- step, so that held is exact whenever no script runs; load.lua and
-- loadstep.lua write it from the snapshot.
--
-- include: hold
--
-- Expects the hold block. Defines:
--   budgetLeft(budgetKey)
--     what is left of the budget (cap - held, a number), nil without one
--   fitBudget(left, discount, clip)
--     the budget rule (voucher.Budget.Fit): the discount a new hold gets,
--     nil when it does not fit; a budget fits while something is left and
--     the discount is at most that, clip gives what is left instead
--   loadBudget(budgetKey, cap, held, expireAt)
--     writes the budget of a snapshot (cap '0': none, nothing written),
--     with PEXPIREAT expireAt
--   countBudget(budgetKey, hold, was, is, capped)
--     records that the order of the encoded hold went from holding a use
--     (was, a boolean) to holding one or not (is): held moves by its
--     discount, and its occurrence's count (w:<windowMs>) by one. capped
--     is whether the budget has a cap, when the script has read it already
--     (nil reads it); returns it (nil when was is is). The hold's discount
--     is parsed only when the budget has a cap
--   windowHeld(budgetKey, window)
--     the uses held in the occurrence window (a windowMs string; 0 when
--     none is counted)
--   loadWindows(budgetKey, windows, expireAt)
--     writes the occurrences' counts of a snapshot, windows being a JSON
--     object windowMs -> count ('' none), with PEXPIREAT expireAt
local function budgetLeft(budgetKey)
  local v = redis.call('HMGET', budgetKey, 'cap', 'held')
  if not v[1] then
    return nil
  end
  return tonumber(v[1]) - tonumber(v[2] or '0')
end

local function fitBudget(left, discount, clip)
  if left <= 0 then
    return nil
  end
  if discount <= left then
    return discount
  end
  if clip then
    return left
  end
  return nil
end

local function loadBudget(budgetKey, cap, held, expireAt)
  if cap and cap ~= '0' then
    redis.call('HSET', budgetKey, 'cap', cap, 'held', held)
    redis.call('PEXPIREAT', budgetKey, expireAt)
  end
end

local function windowHeld(budgetKey, window)
  return tonumber(redis.call('HGET', budgetKey, 'w:' .. window) or '0')
end

local function loadWindows(budgetKey, windows, expireAt)
  if not windows or windows == '' then
    return
  end
  for ms, n in pairs(cjson.decode(windows)) do
    redis.call('HSET', budgetKey, 'w:' .. ms, n)
  end
  redis.call('PEXPIREAT', budgetKey, expireAt)
end

local function countBudget(budgetKey, hold, was, is, capped)
  if was == is then
    return capped
  end
  local w = holdWindow(hold)
  if w and (is or redis.call('HEXISTS', budgetKey, 'w:' .. w) == 1) then
    redis.call('HINCRBY', budgetKey, 'w:' .. w, is and 1 or -1)
  end
  if capped == nil then
    capped = redis.call('HEXISTS', budgetKey, 'cap') == 1
  end
  if not capped then
    return capped
  end
  local d = holdDiscount(hold)
  if d and d ~= 0 then
    redis.call('HINCRBY', budgetKey, 'held', is and d or -d)
  end
  return capped
end
