-- unclaim.lua: drops an orderId's claim if the voucher owns it (the
-- reservation was given back and the orderId may be retried).
--
-- KEYS[1]  <prefix>order:{ORDER_ID}
-- ARGV[1]  voucher code
--
-- Returns 1 when the claim was dropped, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
