-- reserve.lua: checks and takes one use of a voucher for one orderId, in one
-- atomic step (idempotency by orderId, the campaign code, per-customer quota,
-- remaining count).
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
--                                      (a campaign's budget, CODE its id)
--
-- ARGV[1] -> orderId
-- ARGV[2] -> customerId (voucher.ValidCustomerID: never '|'); compared as a string; an int64 does
--            not fit a Lua number
-- ARGV[3] -> perUserLimit
-- ARGV[4] -> encoded hold to store, "H|cust|orderAmount|discount|reservedAtMs|expiresAtMs[|owner[|code]]"
--            ("P|..." for a pending hold in Kafka mode); the code field is ARGV[5]'s
-- ARGV[5] -> the campaign code presented, '' for a voucher
--
-- Returns {status, remaining} or {status, remaining, stored hold or version}:
--   {1, remaining, ver}   taken: a use was taken; remaining is after the take,
--                         ver the version after it
--   {2, remaining, hold}  replay: orderId holds a use (H or P) for this customer
--                         and this code
--   {3, remaining, hold}  conflict: orderId is known with another customer or
--                         another campaign code
--   {4, remaining, hold}  released: orderId was released (R marker)
--   {5, 0}                not loaded: the remaining key is absent
--   {6, remaining}        quota held: the customer holds perUserLimit uses
--   {7, remaining, ver}   sold out: no use left; ver is the version, '' if absent
--   {9, remaining}        code used: the campaign code is held by another order
-- remaining is -1 where it is unknown (a known orderId of an unloaded voucher).
-- The version lets the caller's sold-out cache keep its copy of the orders
-- when nothing changed.
local stored = redis.call('HGET', KEYS[3], ARGV[1])
local rem = redis.call('GET', KEYS[1])
if stored then
  local state, cust = string.match(stored, '^(%a)|([^|]*)|')
  local code = string.match(stored, '^%a|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|([^|]+)') or ''
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

if ARGV[5] ~= '' and redis.call('HEXISTS', KEYS[5], ARGV[5]) == 1 then
  return {9, r}
end
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if held >= tonumber(ARGV[3]) then
  return {6, r}
end
if r <= 0 then
  return {7, r, redis.call('GET', KEYS[4]) or ''}
end

r = redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
local ver = redis.call('INCR', KEYS[4])
local last = 4
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[5], ARGV[1])
  last = 5
end

-- The hashes may have just been created (a voucher loaded with no holds, or
-- whose last customer gave everything back), and the version too (a voucher
-- loaded before versions existed): give them the expiry of the remaining key
-- so that an old sale leaves Redis as a whole.
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  for i = 2, last do
    if redis.call('PTTL', KEYS[i]) == -1 then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
  end
end
return {1, r, tostring(ver)}
