-- voucher_definition: what voucher_get reads but the live counts and the
-- budget's sums, which read every held redemption of the voucher: the
-- columns of one row of voucher, voucher_stacking and each voucher_limit
-- kind, whatever the voucher's size. The service's definition cache
-- refreshes with it on the reservation path.
-- $1 code
SELECT v.code, coalesce(v.discount_amount, 0), v.min_order_amount, v.total_limit, v.per_user_limit, v.starts_at, v.ends_at,
       v.flash_sale, v.used_count, v.created_at, v.updated_at, v.disabled,
       coalesce(v.discount_percent_bp, 0), coalesce(v.max_discount_amount, 0), v.customer_id_normalization, coalesce(v.currency, ''), coalesce(v.bound_customer, ''),
       0, 0,
       v.campaign,
       coalesce(b.cap, 0), coalesce(b.held, 0), coalesce(b.clip, false), 0::bigint, 0::bigint,
       v.schedule, coalesce(v.window_limit, 0), w.period_start, coalesce(w.held, 0)::integer,
       s.voucher_code IS NOT NULL, coalesce(s.exclusive_group, '')
FROM voucher v
LEFT JOIN voucher_stacking s ON s.voucher_code = v.code
LEFT JOIN voucher_limit b ON b.voucher_code = v.code AND b.kind = 'budget' AND b.period_start = '-infinity'
LEFT JOIN LATERAL (
    SELECT l.period_start, l.held FROM voucher_limit l
    WHERE l.voucher_code = v.code AND l.kind = 'window'
    ORDER BY l.period_start DESC LIMIT 1
) w ON true
WHERE v.code = $1
