-- extend.lua: sets the expiry recorded in an orderId's hold (H, P or C) to a
-- later one, so that a replay answers with the expiry the database has
-- after a hold extension. A released marker, an unknown orderId or an
-- earlier expiry is left as it is.
--
-- KEYS[1] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[2] -> voucher:{CODE}:version    string int: bumped by every change of the orders
--
-- ARGV[1] -> orderId
-- ARGV[2] -> new expiresAt, unix milliseconds
--
-- Returns:
--   1 if the hold's expiry changed
--   0 otherwise
--
-- include: hold, keys
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored or not holdsUse(holdState(stored)) then
  return 0
end
local expires = holdExpiry(stored)
if not expires or expires >= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], holdWithExpiry(stored, ARGV[2]))
bumpVersion(KEYS[2], KEYS[1])
return 1
