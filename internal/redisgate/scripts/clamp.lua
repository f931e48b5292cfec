-- clamp.lua: lowers remaining to totalLimit minus the held count (the orders
-- holding a use, lib/held.lua), if it is above; never raises it (a hold the
-- gate lost is adopted first, and a lower counter only undersells). O(1):
-- it reads the count, not the orders.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:held       string int: orders holding a use
-- KEYS[3] -> voucher:{CODE}:heldscan   set: present while heldinit.lua counts
--
-- ARGV[1] -> totalLimit
--
-- Returns:
--   {1, before, after} remaining before and after (equal when not lowered)
--   {0, 0, 0}          the voucher is not loaded (nothing changed)
--   {2, before, before} the held count is absent or under way: nothing
--                      changed; count it (heldinit.lua) and call again
local rem = redis.call('GET', KEYS[1])
if not rem then
  return {0, 0, 0}
end
local before = tonumber(rem)
local held = redis.call('GET', KEYS[2])
if not held or redis.call('EXISTS', KEYS[3]) == 1 then
  return {2, before, before}
end
local expected = tonumber(ARGV[1]) - tonumber(held)
if before <= expected then
  return {1, before, before}
end
-- INCRBY, not SET: it keeps the key's expiry.
local after = redis.call('INCRBY', KEYS[1], expected - before)
return {1, before, after}
