-- clamp.lua: lowers remaining to totalLimit minus the holds the gate records
-- (H, P and C orders), if it is above; never raises it (a hold the gate lost is
-- adopted first, and a lower counter only undersells). Reads every order:
-- for reconciliation, not the hot path.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:orders     hash orderId -> encoded hold
--
-- ARGV[1] -> totalLimit
--
-- Returns:
--   {1, before, after} remaining before and after (equal when not lowered)
--   {0, 0, 0}          the voucher is not loaded (nothing changed)
--
-- include: hold
local rem = redis.call('GET', KEYS[1])
if not rem then
  return {0, 0, 0}
end
local before = tonumber(rem)
local held = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  if holdsUse(holdState(v)) then
    held = held + 1
  end
end
local expected = tonumber(ARGV[1]) - held
if before <= expected then
  return {1, before, before}
end
-- INCRBY, not SET: it keeps the key's expiry.
local after = redis.call('INCRBY', KEYS[1], expected - before)
return {1, before, after}
