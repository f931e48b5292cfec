-- stack_of: the stack an orderId is, or whose member's redemption it is.
-- $1 order_id
SELECT order_id FROM voucher_stack WHERE order_id = $1
UNION ALL
SELECT order_id FROM voucher_stack_member WHERE member_order_id = $1
LIMIT 1
