-- validate.lua: answers what reserve.lua would answer for one orderId, and
-- writes nothing (read-only: run with EVALSHA_RO-safe commands only).
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
--
-- ARGV[1] -> orderId, or '' to leave the orderId checks out
-- ARGV[2] -> customerId, compared as a string, as in reserve.lua
-- ARGV[3] -> perUserLimit
--
-- Returns the statuses of reserve.lua, in the same order of checks:
--   {1, remaining}        a use would be taken
--   {2, remaining, hold}  replay: orderId holds a use (H or P) for this customer
--   {3, remaining, hold}  conflict: orderId is known with another customer
--   {4, remaining, hold}  released: orderId was released
--   {5, 0}                not loaded
--   {6, remaining}        quota held
--   {7, remaining}        sold out
local rem = redis.call('GET', KEYS[1])
if ARGV[1] ~= '' then
  local stored = redis.call('HGET', KEYS[3], ARGV[1])
  if stored then
    local state, cust = string.match(stored, '^(%a)|([^|]*)|')
    local r = tonumber(rem) or -1
    if cust ~= ARGV[2] then
      return {3, r, stored}
    end
    if state == 'R' then
      return {4, r, stored}
    end
    return {2, r, stored}
  end
end

if not rem then
  return {5, 0}
end
local r = tonumber(rem)

local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if held >= tonumber(ARGV[3]) then
  return {6, r}
end
if r <= 0 then
  return {7, r}
end
return {1, r}
