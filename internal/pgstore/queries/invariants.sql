-- invariants: the invariants of the stored counters, one row per breach,
-- for the vouchers whose codes are in $1 (every voucher when $1 is NULL).
--   oversell        held redemptions (RESERVED, CONFIRMED) above total_limit
--   used_count      voucher.used_count differs from its held redemptions
--   customer usage  a voucher_customer_usage.held differs from the
--                   customer's held redemptions of that voucher
--   per-user limit  a customer holds more redemptions than per_user_limit
--   code reuse      a campaign code held by more than one redemption
--   code campaign   a redemption of a campaign made without one of its
--                   codes, or a campaign code on a redemption of another
--   customer_id     a row's customer_id is not voucherd_customer_legacy of
--                   its customer (the column the previous release reads)
--   limit counter   a voucher_limit.held differs from what the held
--                   redemptions weigh (voucherd_limit_weight), or exceeds
--                   its cap: for a money budget, the sum of the held
--                   discounts = budgetReserved + budgetConfirmed <= budgetAmount;
--                   for a quota per window, the uses held of each
--                   occurrence (window_start) <= windowLimit
-- Columns: kind, voucher code, message.
WITH v AS (
    SELECT x.code, x.total_limit, x.per_user_limit, x.used_count, x.campaign
    FROM voucher x WHERE $1::text[] IS NULL OR x.code = ANY ($1::text[])
), held AS (
    SELECT r.voucher_code, r.customer, count(*)::integer AS n
    FROM voucher_redemption r JOIN v ON v.code = r.voucher_code
    WHERE r.status IN ('RESERVED', 'CONFIRMED')
    GROUP BY r.voucher_code, r.customer
), per_voucher AS (
    SELECT v.code, v.total_limit, v.used_count, coalesce(sum(h.n), 0)::integer AS n
    FROM v LEFT JOIN held h ON h.voucher_code = v.code
    GROUP BY v.code, v.total_limit, v.used_count
), per_customer AS (
    SELECT coalesce(u.voucher_code, h.voucher_code) AS code, coalesce(u.customer, h.customer) AS customer,
           coalesce(u.held, 0) AS counter, coalesce(h.n, 0) AS n
    FROM (SELECT u.* FROM voucher_customer_usage u JOIN v ON v.code = u.voucher_code) u
    FULL JOIN held h ON h.voucher_code = u.voucher_code AND h.customer = u.customer
)
SELECT 'oversell', p.code, format('%s: OVERSELL: %s held rows, totalLimit %s', p.code, p.n, p.total_limit)
FROM per_voucher p WHERE p.n > p.total_limit
UNION ALL
SELECT 'used_count', p.code, format('%s: used_count %s != held rows %s', p.code, p.used_count, p.n)
FROM per_voucher p WHERE p.used_count <> p.n
UNION ALL
SELECT 'customer usage', c.code, format('%s: voucher_customer_usage.held %s != held rows %s for customer %s',
                                        c.code, c.counter, c.n, c.customer)
FROM per_customer c WHERE c.counter <> c.n
UNION ALL
SELECT 'per-user limit', c.code, format('%s: customer %s holds %s uses, perUserLimit %s',
                                        c.code, c.customer, c.n, v.per_user_limit)
FROM per_customer c JOIN v ON v.code = c.code WHERE c.n > v.per_user_limit
UNION ALL
SELECT 'code reuse', r.voucher_code, format('%s: code %s held by %s redemptions', r.voucher_code, r.code, count(*))
FROM voucher_redemption r JOIN v ON v.code = r.voucher_code
WHERE r.code IS NOT NULL AND r.status IN ('RESERVED', 'CONFIRMED')
GROUP BY r.voucher_code, r.code HAVING count(*) > 1
UNION ALL
SELECT 'code campaign', r.voucher_code, format('%s: order %s made with code %s, of campaign %s',
                                              r.voucher_code, r.order_id, r.code, c.campaign_id)
FROM voucher_redemption r JOIN v ON v.code = r.voucher_code LEFT JOIN campaign_code c ON c.code = r.code
WHERE (r.code IS NOT NULL OR v.campaign) AND c.campaign_id IS DISTINCT FROM r.voucher_code
UNION ALL
SELECT 'customer_id', r.voucher_code, format('%s: order %s: customer_id %s is not the form of customer %s',
                                             r.voucher_code, r.order_id, r.customer_id, r.customer)
FROM voucher_redemption r JOIN v ON v.code = r.voucher_code
WHERE r.customer_id IS DISTINCT FROM voucherd_customer_legacy(r.customer)
UNION ALL
SELECT 'customer_id', u.voucher_code, format('%s: usage counter of customer %s has customer_id %s',
                                             u.voucher_code, u.customer, u.customer_id)
FROM voucher_customer_usage u JOIN v ON v.code = u.voucher_code
WHERE u.customer_id IS DISTINCT FROM voucherd_customer_legacy(u.customer)
UNION ALL
SELECT 'limit counter', l.voucher_code, format('%s: %s counter held %s != held redemptions %s (cap %s)',
                                               l.voucher_code, l.kind, l.held, l.n, l.cap)
FROM (SELECT l.voucher_code, l.kind, l.cap, l.held,
             (SELECT coalesce(sum(voucherd_limit_weight(l.kind, r.status, r.discount_amount)), 0)
              FROM voucher_redemption r WHERE r.voucher_code = l.voucher_code
                AND (l.kind <> 'window' OR r.window_start = l.period_start))::bigint AS n
      FROM voucher_limit l JOIN v ON v.code = l.voucher_code) l
WHERE l.held <> l.n OR l.n > l.cap
ORDER BY 2, 1, 3
