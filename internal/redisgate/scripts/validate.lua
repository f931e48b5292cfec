-- validate.lua: answers what reserve.lua would answer for one orderId, and
-- writes nothing (read-only: run with EVALSHA_RO-safe commands only).
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
--
-- ARGV[1] -> orderId, or '' to leave the orderId checks out
-- ARGV[2] -> customerId, compared as a string, as in reserve.lua
-- ARGV[3] -> perUserLimit
-- ARGV[4] -> the campaign code presented, '' for a voucher
--
-- Returns the statuses of reserve.lua, in the same order of checks:
--   {1, remaining}        a use would be taken
--   {2, remaining, hold}  replay: orderId holds a use (H or P) for this customer and code
--   {3, remaining, hold}  conflict: orderId is known with another customer or code
--   {4, remaining, hold}  released: orderId was released
--   {5, 0}                not loaded
--   {6, remaining}        quota held
--   {7, remaining}        sold out
--   {9, remaining}        code used by another order
local rem = redis.call('GET', KEYS[1])
if ARGV[1] ~= '' then
  local stored = redis.call('HGET', KEYS[3], ARGV[1])
  if stored then
    local state, cust = string.match(stored, '^(%a)|([^|]*)|')
    local code = string.match(stored, '^%a|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|([^|]+)') or ''
    local r = tonumber(rem) or -1
    if cust ~= ARGV[2] or code ~= ARGV[4] then
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

if ARGV[4] ~= '' and redis.call('HEXISTS', KEYS[4], ARGV[4]) == 1 then
  return {9, r}
end
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if held >= tonumber(ARGV[3]) then
  return {6, r}
end
if r <= 0 then
  return {7, r}
end
return {1, r}
