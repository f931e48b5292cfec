-- code_resolve: in one statement, what a reservation or validation reads
-- first of a code the service has no cached definition for:
--   the voucher the code names (voucher_get's columns without the live
--   counts, which would cost a scan of a busy voucher's redemptions), else
--   the budget of the campaign the code belongs to, with the code's
--   customer as the one it serves when the code has one;
--   whether a RESERVED or CONFIRMED redemption holds the code (a campaign
--   code; index voucher_redemption_code_live_idx);
--   the redemption of the orderId whatever its voucher (orders_get's
--   columns);
--   the voucher's money budget: amount and clip (0 and false for none);
--   its recurring windows (NULL: none) and quota per occurrence (0: none);
--   its stacking setting (no voucher_stacking row: not stackable), so that
--   a definition cached from this read stands in for the setting as one
--   read with voucher_get does.
-- Always one row, read with the same index probes whether the code names a
-- voucher, a campaign code or nothing, so that an unknown code costs what a
-- known one does; the flags say what was found, the columns of what was not
-- hold neutral values.
-- $1 code, $2 order_id ('' for none)
SELECT coalesce(x.code, ''), coalesce(x.discount_amount, 0), coalesce(x.min_order_amount, 0),
       coalesce(x.total_limit, 0), coalesce(x.per_user_limit, 0),
       coalesce(x.starts_at, 'epoch'), coalesce(x.ends_at, 'epoch'), coalesce(x.flash_sale, false),
       coalesce(x.used_count, 0), coalesce(x.created_at, 'epoch'), coalesce(x.updated_at, 'epoch'),
       coalesce(x.disabled, false), coalesce(x.discount_percent_bp, 0), coalesce(x.max_discount_amount, 0),
       coalesce(x.customer_id_normalization, 'none'), coalesce(x.currency, ''), coalesce(x.code_customer, x.bound_customer, ''),
       x.code IS NOT NULL, coalesce(x.by_campaign, false),
       EXISTS (SELECT 1 FROM voucher_redemption h WHERE h.code = q.code AND h.status <> 'RELEASED'),
       o.order_id IS NOT NULL,
       coalesce(o.order_id, ''), coalesce(o.code, o.voucher_code, ''), coalesce(o.customer, ''),
       coalesce(o.order_amount, 0), coalesce(o.discount_amount, 0), coalesce(o.status, ''),
       coalesce(o.created_at, 'epoch'), coalesce(o.updated_at, 'epoch'), coalesce(o.expires_at, 'epoch'),
       coalesce(bl.cap, 0), coalesce(bl.clip, false),
       x.schedule, coalesce(x.window_limit, 0),
       st.voucher_code IS NOT NULL, coalesce(st.exclusive_group, '')
FROM (SELECT $1::text AS code, $2::text AS order_id) q
LEFT JOIN LATERAL (
    -- One campaign_code probe, then one voucher probe: of the campaign's
    -- budget when the code is a campaign's, else of the code itself
    -- (vouchers and campaign codes share one namespace).
    SELECT b.*, k.by_campaign, k.code_customer
    FROM (SELECT coalesce(c.campaign_id, q.code) AS id, c.code IS NOT NULL AS by_campaign, c.customer AS code_customer
          FROM (SELECT 1) one LEFT JOIN campaign_code c ON c.code = q.code) k
    JOIN voucher b ON b.code = k.id
) x ON true
LEFT JOIN voucher_redemption o ON o.order_id = q.order_id
-- The money budget's definition (its counters are not read: they move with
-- every use).
LEFT JOIN voucher_limit bl ON bl.voucher_code = x.code AND bl.kind = 'budget' AND bl.period_start = '-infinity'
LEFT JOIN voucher_stacking st ON st.voucher_code = x.code
