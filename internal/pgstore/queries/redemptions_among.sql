-- redemptions_among: the redemptions of a voucher among some orderIds (one
-- probe of the primary key per orderId), as redemptions_of_voucher answers
-- them; an orderId with no row of the voucher is absent.
-- $1 code, $2 order_ids
SELECT order_id, coalesce(code, voucher_code), customer, order_amount, discount_amount, status, created_at, updated_at, expires_at, held_since,
       window_start
FROM voucher_redemption
WHERE order_id = ANY($2::text[]) AND voucher_code = $1
