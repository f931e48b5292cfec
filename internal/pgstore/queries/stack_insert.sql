-- stack_insert: claim an orderId for a stack; no row when it is a stack
-- already (a concurrent insert of it is waited for).
-- $1 order_id, $2 customer, $3 order_amount, $4 codes, $5 now
INSERT INTO voucher_stack (order_id, customer, order_amount, codes, created_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (order_id) DO NOTHING
RETURNING order_id
