-- campaign_get: a campaign, its budget and the budget's live counts of
-- RESERVED and CONFIRMED redemptions.
-- $1 id
SELECT c.id, c.name, c.code_prefix, c.code_length, c.code_count, c.created_at,
       v.code, coalesce(v.discount_amount, 0), v.min_order_amount, v.total_limit, v.per_user_limit, v.starts_at, v.ends_at,
       v.flash_sale, v.used_count, v.created_at, v.updated_at, v.disabled,
       coalesce(v.discount_percent_bp, 0), coalesce(v.max_discount_amount, 0), v.customer_id_normalization, coalesce(v.currency, ''), coalesce(v.bound_customer, ''),
       (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = v.code AND r.status = 'RESERVED')::integer,
       (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = v.code AND r.status = 'CONFIRMED')::integer
FROM campaign c JOIN voucher v ON v.code = c.id
WHERE c.id = $1
