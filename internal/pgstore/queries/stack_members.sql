-- stack_members: the redemptions of a stack's codes, in the stack's order.
-- $1 order_id
SELECT m.voucher_code, r.order_id, coalesce(r.code, r.voucher_code), r.customer, r.order_amount, r.discount_amount,
       r.status, r.created_at, r.updated_at, r.expires_at
FROM voucher_stack_member m JOIN voucher_redemption r ON r.order_id = m.member_order_id
WHERE m.order_id = $1
ORDER BY m.position
