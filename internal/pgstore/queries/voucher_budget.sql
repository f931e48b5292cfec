-- voucher_budget: a voucher's money budget (voucher_limit, kind budget):
-- its amount, what the held redemptions weigh on its counter, whether it
-- clips, and the held discounts summed by status (index
-- voucher_redemption_code_status_idx). No row: the voucher has no budget.
-- $1 code
SELECT l.cap, l.held, l.clip,
       (SELECT coalesce(sum(r.discount_amount), 0) FROM voucher_redemption r
        WHERE r.voucher_code = l.voucher_code AND r.status = 'RESERVED')::bigint,
       (SELECT coalesce(sum(r.discount_amount), 0) FROM voucher_redemption r
        WHERE r.voucher_code = l.voucher_code AND r.status = 'CONFIRMED')::bigint
FROM voucher_limit l
WHERE l.voucher_code = $1 AND l.kind = 'budget' AND l.period_start = '-infinity'
