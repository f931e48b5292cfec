-- commit.lua: marks pending holds durable (P -> H), in Kafka mode once their
-- reservation events are acknowledged. Anything else is left as it is. The
-- holds of concurrent reservations of one voucher are committed in one call;
-- each is decided on its own, as if committed one after the other.
--
-- KEYS[1] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[2] -> voucher:{CODE}:version    string int: bumped by every change of the orders
--
-- ARGV[1..n] -> orderIds
--
-- Returns an array of n integers, in ARGV's order:
--   1 if that hold went from P to H
--   0 otherwise (unknown orderId, already H, released)
local out = {}
local changed = false
for i, orderID in ipairs(ARGV) do
  local stored = redis.call('HGET', KEYS[1], orderID)
  if stored and string.sub(stored, 1, 1) == 'P' then
    redis.call('HSET', KEYS[1], orderID, 'H' .. string.sub(stored, 2))
    changed = true
    out[i] = 1
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
