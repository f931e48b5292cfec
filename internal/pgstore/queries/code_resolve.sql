-- code_resolve: in one statement, what a reservation or validation reads
-- first of a code the service has no cached definition for:
--   the voucher the code names, with live counts (voucher_get's columns),
--   else the budget of the campaign the code belongs to (its row; counts 0);
--   whether a RESERVED or CONFIRMED redemption holds the code (a campaign
--   code; index voucher_redemption_code_live_idx);
--   the redemption of the orderId whatever its voucher (orders_get's
--   columns).
-- Always one row, read with the same index probes whether the code exists
-- or not, so that an unknown code costs what a known one does; the flags
-- say what was found, the columns of what was not hold neutral values.
-- $1 code, $2 order_id ('' for none)
SELECT coalesce(x.code, ''), coalesce(x.discount_amount, 0), coalesce(x.min_order_amount, 0),
       coalesce(x.total_limit, 0), coalesce(x.per_user_limit, 0),
       coalesce(x.starts_at, 'epoch'), coalesce(x.ends_at, 'epoch'), coalesce(x.flash_sale, false),
       coalesce(x.used_count, 0), coalesce(x.created_at, 'epoch'), coalesce(x.updated_at, 'epoch'),
       coalesce(x.disabled, false), coalesce(x.discount_percent_bp, 0), coalesce(x.max_discount_amount, 0),
       coalesce(x.customer_id_normalization, 'none'),
       CASE WHEN x.by_campaign THEN 0 ELSE
           (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = x.code AND r.status = 'RESERVED') END::integer,
       CASE WHEN x.by_campaign THEN 0 ELSE
           (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = x.code AND r.status = 'CONFIRMED') END::integer,
       x.code IS NOT NULL, coalesce(x.by_campaign, false),
       EXISTS (SELECT 1 FROM voucher_redemption h WHERE h.code = q.code AND h.status <> 'RELEASED'),
       o.order_id IS NOT NULL,
       coalesce(o.order_id, ''), coalesce(o.code, o.voucher_code, ''), coalesce(o.customer, ''),
       coalesce(o.order_amount, 0), coalesce(o.discount_amount, 0), coalesce(o.status, ''),
       coalesce(o.created_at, 'epoch'), coalesce(o.updated_at, 'epoch'), coalesce(o.expires_at, 'epoch')
FROM (SELECT $1::text AS code, $2::text AS order_id) q
LEFT JOIN LATERAL (
    SELECT v.*, false AS by_campaign FROM voucher v WHERE v.code = q.code
    UNION ALL
    SELECT b.*, true AS by_campaign FROM campaign_code c JOIN voucher b ON b.code = c.campaign_id WHERE c.code = q.code
    LIMIT 1
) x ON true
LEFT JOIN voucher_redemption o ON o.order_id = q.order_id
