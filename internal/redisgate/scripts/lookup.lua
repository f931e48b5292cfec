-- lookup.lua: reads what the gate knows of one orderId. Read-only.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:orders     hash orderId -> encoded hold
--
-- ARGV[1] -> orderId
--
-- Returns:
--   the encoded hold (lib/hold.lua), in any state
--   nil if the orderId is unknown or the voucher is not loaded
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
return redis.call('HGET', KEYS[2], ARGV[1])
