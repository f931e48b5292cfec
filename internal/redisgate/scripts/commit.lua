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
-- ARGV[1..n] -> orderIds
--
-- Returns an array of n integers, in ARGV's order:
--   1 if that hold went from P to H
--   0 otherwise (unknown orderId, already H, released)
local codePattern = '^%a|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|([^|]+)'
local replacesPattern = '^%a|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|([^|]+)'
local out = {}
local changed = false
for i, orderID in ipairs(ARGV) do
  local stored = redis.call('HGET', KEYS[1], orderID)
  if stored and string.sub(stored, 1, 1) == 'P' then
    redis.call('HSET', KEYS[1], orderID, 'H' .. string.sub(stored, 2))
    changed = true
    out[i] = 1
    local replaced = string.match(stored, replacesPattern)
    local old = replaced and redis.call('HGET', KEYS[1], replaced)
    if old and string.sub(old, 1, 1) == 'R' then
      local ocode = string.match(old, codePattern)
      if ocode and redis.call('HGET', KEYS[3], ocode) == replaced then
        redis.call('HDEL', KEYS[3], ocode)
        redis.call('HSET', KEYS[4], ocode, replaced)
        local ttl = redis.call('PTTL', KEYS[1])
        if ttl > 0 and redis.call('PTTL', KEYS[4]) == -1 then
          redis.call('PEXPIRE', KEYS[4], ttl)
        end
      end
    end
  else
    out[i] = 0
  end
end
if changed and redis.call('INCR', KEYS[2]) == 1 then
  -- Created here (loaded before versions existed): the voucher's expiry.
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
return out
