-- claim.lua: claims an orderId for one voucher across all vouchers, so that
-- Kafka mode can refuse an orderId already used with another code before it
-- answers (the per-voucher keys cannot see other vouchers' orders). The gate
-- claims with one SET NX GET PXAT, which decides alike; it runs this script
-- only on a Redis older than 7.0, which refuses NX with GET (claim.go).
--
-- KEYS[1]  <prefix>order:{ORDER_ID}   string: the voucher code owning the orderId
-- ARGV[1]  voucher code
-- ARGV[2]  expiry of the claim, unix milliseconds
--
-- Returns the owning code: ARGV[1] when this call claimed it or already
-- owned it, another code when that voucher owns it.
local owner = redis.call('GET', KEYS[1])
if owner then
  return owner
end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
return ARGV[1]
