-- voucher_max_customer_held: the customer holding the most uses of a voucher
-- and how many; no row when nobody holds one.
-- $1 code
SELECT customer, held
FROM voucher_customer_usage
WHERE voucher_code = $1 AND held > 0
ORDER BY held DESC, customer
LIMIT 1
