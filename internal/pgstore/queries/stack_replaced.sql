-- stack_replaced: a redemption a replacement of several codes names,
-- locked, whether it is still a RESERVED hold at $2 (not expired), and
-- whether it is a member of a stack.
-- $1 order_id, $2 now
SELECT r.customer, r.status = 'RESERVED' AND r.expires_at > $2, coalesce(r.code, r.voucher_code),
       EXISTS (SELECT 1 FROM voucher_stack_member m WHERE m.member_order_id = r.order_id)
FROM voucher_redemption r WHERE r.order_id = $1
FOR UPDATE
