-- confirm.lua: marks a held order confirmed (H -> C), in Kafka mode before
-- the confirmation is written to the store. A replacement takes over only an
-- H hold (replace.lua), so once this ran no replacement can release the
-- order that is being confirmed, and a replacement that ran first leaves the
-- order released here (R), which the confirmation then answers. A C hold
-- still holds its use: a release that the store accepts (its confirmation
-- failed there) gives it back as it would an H hold.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[3] -> voucher:{CODE}:version    string int: bumped by every change of the orders
--
-- ARGV[1] -> orderId
-- ARGV[2] -> the campaign code the confirmation names, '' for a voucher
--
-- Returns:
--   1 the hold is marked confirmed (now or before)
--   0 the gate cannot say: the voucher is not loaded, or the orderId is
--     unknown or held with another campaign code (the store decides)
--   2 the hold is pending (P): its reservation event is not acknowledged yet
--   3 the orderId is released
--
-- include: hold, keys
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local stored = redis.call('HGET', KEYS[2], ARGV[1])
if not stored then
  return 0
end
if (holdCode(stored) or '') ~= ARGV[2] then
  return 0
end
local state = holdState(stored)
if state == RELEASED then
  return 3
end
if state == PENDING then
  return 2
end
if state == CONFIRMED then
  return 1
end
redis.call('HSET', KEYS[2], ARGV[1], holdAs(stored, CONFIRMED))
bumpVersion(KEYS[3], KEYS[1])
return 1
