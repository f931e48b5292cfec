-- stack_get: a stack and its codes.
-- $1 order_id
SELECT customer, order_amount, codes, created_at FROM voucher_stack WHERE order_id = $1
