-- replace.lua: takes the use of a customer's held order for a new orderId in
-- one atomic step (a retry after a failed payment): the old order is marked
-- released, the new one stored, and neither the remaining count nor the
-- customer's count moves, so no other reservation can take the use between.
-- On a campaign's budget the new order's code is taken in the same step, and
-- the old order's code freed (they may be the same code) - unless the new
-- hold is pending (Kafka mode): then the old order keeps holding its code
-- until the replacement's event is acknowledged (commit.lua) or the new hold
-- is given back (release.lua, unreplace.lua). Until then PostgreSQL still
-- has the old order holding it, and an order that took it here could have
-- its event applied before the replacement's and refused.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
--
-- ARGV[1] -> new orderId
-- ARGV[2] -> customerId (voucher.ValidCustomerID: never '|'), compared as a string
-- ARGV[3] -> encoded hold to store for the new orderId (as in reserve.lua)
-- ARGV[4] -> replaced orderId
-- ARGV[5] -> the campaign code the new order presents, '' for a voucher
--
-- Returns, with the statuses of reserve.lua where they apply:
--   {1, remaining, ver}   replaced: ver is the version after it
--   {2, remaining, hold}  replay: the new orderId holds a use for this customer and code
--   {3, remaining, hold}  conflict: the new orderId is another customer's or code's
--   {4, remaining, hold}  released: the new orderId was released
--   {5, 0}                not loaded
--   {8, remaining}        not held: the replaced orderId is not this
--                         customer's held (H) hold: unknown, released,
--                         pending, or confirmed (C, confirm.lua)
--   {9, remaining}        code used: the new code is held by an order other
--                         than the replaced one
local codePattern = '^%a|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|([^|]+)'
local stored = redis.call('HGET', KEYS[3], ARGV[1])
local rem = redis.call('GET', KEYS[1])
if stored then
  local state, cust = string.match(stored, '^(%a)|([^|]*)|')
  local code = string.match(stored, codePattern) or ''
  local r = tonumber(rem) or -1
  if cust ~= ARGV[2] or code ~= ARGV[5] then
    return {3, r, stored}
  end
  if state == 'R' then
    return {4, r, stored}
  end
  return {2, r, stored}
end
if not rem then
  return {5, 0}
end
local r = tonumber(rem)

local old = redis.call('HGET', KEYS[3], ARGV[4])
if not old then
  return {8, r}
end
local ostate, ocust = string.match(old, '^(%a)|([^|]*)|')
if ostate ~= 'H' or ocust ~= ARGV[2] then
  return {8, r}
end
if ARGV[5] ~= '' then
  local holder = redis.call('HGET', KEYS[5], ARGV[5])
  if holder and holder ~= ARGV[4] then
    return {9, r}
  end
end

redis.call('HSET', KEYS[3], ARGV[4], 'R' .. string.sub(old, 2))
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
local ocode = string.match(old, codePattern)
if ocode and string.sub(ARGV[3], 1, 1) ~= 'P' and redis.call('HGET', KEYS[5], ocode) == ARGV[4] then
  redis.call('HDEL', KEYS[5], ocode)
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[5], ARGV[1])
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 and redis.call('PTTL', KEYS[5]) == -1 then
    redis.call('PEXPIRE', KEYS[5], ttl)
  end
end
local ver = redis.call('INCR', KEYS[4])
if ver == 1 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[4], ttl)
  end
end
return {1, r, tostring(ver)}
