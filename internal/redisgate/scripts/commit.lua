-- commit.lua: marks pending holds durable (P -> H), in Kafka mode once their
-- reservation events are acknowledged. Anything else is left as it is. The
-- holds of concurrent reservations of one voucher are committed in one call;
-- each is decided on its own, as if committed one after the other.
--
-- A replacement's hold (its ninth field names the order it replaced) frees,
-- when it is committed, the campaign code its replaced order kept while the
-- replacement was pending (replace.lua): the event that releases that order
-- in PostgreSQL is now in the log, ahead of any event of an order that takes
-- the code from here on (a campaign's events share a partition). The
-- replaced order's own event, earlier in the log, may not be applied yet:
-- the code is recorded in :freed with that order, so that a next holder is
-- written to PostgreSQL out of turn (voucher.Service.applyFromGate) only
-- once the replaced order is there.
--
-- KEYS[1] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[2] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[3] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
-- KEYS[4] -> voucher:{CODE}:freed      hash campaign code -> replaced orderId that held it last
--
-- ARGV[1..n] -> orderId|owner: the hold and the instance committing it
--
-- Only the hold's owner commits it: a fencer that took the hold over
-- (takeover.lua) owns it, so its writer, resumed after a stall, is refused
-- and cannot answer 201 for an order the fence keeps out of the store.
--
-- Returns an array of n integers, in ARGV's order:
--   1 if that hold went from P to H
--   0 otherwise (unknown orderId, already H, released, another owner's)
--
-- include: hold, codes, keys
local out = {}
local changed = false
for i, arg in ipairs(ARGV) do
  local orderID, owner = ownedOrder(arg)
  local stored = redis.call('HGET', KEYS[1], orderID)
  if stored and holdState(stored) == PENDING and holdOwner(stored) == owner then
    redis.call('HSET', KEYS[1], orderID, holdAs(stored, HELD))
    changed = true
    out[i] = 1
    local kept, replaced = keptCode(KEYS[1], KEYS[3], stored)
    if kept then
      redis.call('HDEL', KEYS[3], kept)
      redis.call('HSET', KEYS[4], kept, replaced)
      shareExpiry(KEYS[1], KEYS[4])
    end
  else
    out[i] = 0
  end
end
if changed then
  bumpVersion(KEYS[2], KEYS[1])
end
return out
