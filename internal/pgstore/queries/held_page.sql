-- held_page: one page of a voucher's redemptions in one status, after a
-- key, in (created_at, order_id) order (a range of
-- voucher_redemption_code_status_created_idx), as redemptions_of_voucher
-- answers them.
-- $1 code, $2 status, $3 after created_at, $4 after order_id, $5 limit
SELECT order_id, coalesce(code, voucher_code), customer, order_amount, discount_amount, status, created_at, updated_at, expires_at, held_since,
       window_start
FROM voucher_redemption
WHERE voucher_code = $1 AND status = $2 AND (created_at, order_id) > ($3, $4)
ORDER BY created_at, order_id
LIMIT $5
