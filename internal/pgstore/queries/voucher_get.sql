-- voucher_get: a voucher with live counts of RESERVED and CONFIRMED
-- redemptions (index voucher_redemption_code_status_created_idx), and
-- whether it is a campaign's budget, and its money budget; its recurring
-- windows (NULL: none), quota per occurrence (0: none) and the counter of
-- its latest occurrence that has one (NULL start: none yet); and its
-- stacking setting (no voucher_stacking row: not stackable).
-- $1 code
SELECT v.code, coalesce(v.discount_amount, 0), v.min_order_amount, v.total_limit, v.per_user_limit, v.starts_at, v.ends_at,
       v.flash_sale, v.used_count, v.created_at, v.updated_at, v.disabled,
       coalesce(v.discount_percent_bp, 0), coalesce(v.max_discount_amount, 0), v.customer_id_normalization, coalesce(v.currency, ''), coalesce(v.bound_customer, ''),
       (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = v.code AND r.status = 'RESERVED')::integer,
       (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = v.code AND r.status = 'CONFIRMED')::integer,
       v.campaign,
       coalesce(b.cap, 0), coalesce(b.held, 0), coalesce(b.clip, false), coalesce(b.reserved, 0), coalesce(b.confirmed, 0),
       v.schedule, coalesce(v.window_limit, 0), w.period_start, coalesce(w.held, 0)::integer,
       s.voucher_code IS NOT NULL, coalesce(s.exclusive_group, '')
FROM voucher v
LEFT JOIN voucher_stacking s ON s.voucher_code = v.code
-- The money budget (voucher_budget's columns; none: zeros).
LEFT JOIN LATERAL (
    SELECT l.cap, l.held, l.clip,
           (SELECT coalesce(sum(r.discount_amount), 0) FROM voucher_redemption r
            WHERE r.voucher_code = l.voucher_code AND r.status = 'RESERVED')::bigint AS reserved,
           (SELECT coalesce(sum(r.discount_amount), 0) FROM voucher_redemption r
            WHERE r.voucher_code = l.voucher_code AND r.status = 'CONFIRMED')::bigint AS confirmed
    FROM voucher_limit l
    WHERE l.voucher_code = v.code AND l.kind = 'budget' AND l.period_start = '-infinity'
) b ON true
LEFT JOIN LATERAL (
    SELECT l.period_start, l.held FROM voucher_limit l
    WHERE l.voucher_code = v.code AND l.kind = 'window'
    ORDER BY l.period_start DESC LIMIT 1
) w ON true
WHERE v.code = $1
