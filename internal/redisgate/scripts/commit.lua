-- commit.lua: marks a pending hold durable (P -> H), in Kafka mode once the
-- reservation event is acknowledged. Anything else is left as it is.
--
-- KEYS[1] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[2] -> voucher:{CODE}:version    string int: bumped by every change of the orders
--
-- ARGV[1] -> orderId
--
-- Returns:
--   1 if the hold went from P to H
--   0 otherwise (unknown orderId, already H, released)
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored and string.sub(stored, 1, 1) == 'P' then
  redis.call('HSET', KEYS[1], ARGV[1], 'H' .. string.sub(stored, 2))
  if redis.call('INCR', KEYS[2]) == 1 then
    -- Created here (loaded before versions existed): the voucher's expiry.
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then
      redis.call('PEXPIRE', KEYS[2], ttl)
    end
  end
  return 1
end
return 0
