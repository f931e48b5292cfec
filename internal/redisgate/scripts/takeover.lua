-- takeover.lua: a fencer takes a pending hold over from the instance that
-- took it, whose heartbeat lapsed, before it fences the order in the store
-- (voucher.Service.fenceHold). The hold keeps its use and its fields; only
-- its owner becomes the fencer, so that commit.lua, which marks a hold
-- durable for its owner alone, refuses the writer should it resume: it can
-- no longer answer 201 for an order whose event the fence will refuse.
--
-- KEYS[1] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[2] -> voucher:{CODE}:version    string int: bumped by every change of the orders
--
-- ARGV[1] -> orderId
-- ARGV[2] -> the owner the fencer saw (the writer)
-- ARGV[3] -> the fencer
--
-- Returns
--   1 the hold is the fencer's now (pending, and its owner was ARGV[2] or ARGV[3])
--   2 the hold is durable (H or C): its writer committed it, its event is in the log
--   0 otherwise (unknown orderId, released, or another owner's)
--
-- include: hold, keys
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then
  return 0
end
local state = holdState(stored)
if state == HELD or state == CONFIRMED then
  return 2
end
if state ~= PENDING then
  return 0
end
local owner = holdOwner(stored)
if owner == ARGV[3] then
  return 1
end
if owner ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], holdWithOwner(stored, ARGV[3]))
bumpVersion(KEYS[2], KEYS[1])
return 1
