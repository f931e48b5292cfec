-- counts.lua: reads a voucher's remaining uses, held count and version
-- together, in one step (reconciliation's drift, inspect). Read-only, O(1).
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:held       string int: orders holding a use (lib/held.lua)
-- KEYS[3] -> voucher:{CODE}:heldscan   set: present while heldinit.lua counts
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of
--                                      the orders (each moves held by one at most)
--
-- Returns:
--   {0, 0, 0, 0}                   the voucher is not loaded
--   {1, remaining, held, version}  held is -1 while the count is absent or
--                                  under way; version 0 when absent
local rem = redis.call('GET', KEYS[1])
if not rem then
  return {0, 0, 0, 0}
end
local ver = tonumber(redis.call('GET', KEYS[4]) or '0')
local held = redis.call('GET', KEYS[2])
if not held or redis.call('EXISTS', KEYS[3]) == 1 then
  return {1, tonumber(rem), -1, ver}
end
return {1, tonumber(rem), tonumber(held), ver}
