-- voucher_lock: voucher_get under a NO KEY UPDATE row lock, for PATCH. Not FOR
-- UPDATE: that would conflict with the KEY SHARE lock that a new redemption's
-- foreign key holds on the voucher and could deadlock with a reservation.
-- $1 code
SELECT v.code, coalesce(v.discount_amount, 0), v.min_order_amount, v.total_limit, v.per_user_limit, v.starts_at, v.ends_at,
       v.flash_sale, v.used_count, v.created_at, v.updated_at, v.disabled,
       coalesce(v.discount_percent_bp, 0), coalesce(v.max_discount_amount, 0), v.customer_id_normalization, coalesce(v.currency, ''), coalesce(v.bound_customer, ''),
       (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = v.code AND r.status = 'RESERVED')::integer,
       (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = v.code AND r.status = 'CONFIRMED')::integer
FROM voucher v
WHERE v.code = $1
FOR NO KEY UPDATE OF v
