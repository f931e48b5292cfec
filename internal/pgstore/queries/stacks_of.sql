-- stacks_of: the stacks some of these redemptions' orderIds belong to.
-- $1 order_ids
SELECT DISTINCT order_id FROM voucher_stack_member WHERE member_order_id = ANY($1::text[])
