-- stack_member_insert: record the redemptions of a stack's codes.
-- $1 order_id, $2 member order_ids, $3 codes (positions 1..n)
INSERT INTO voucher_stack_member (member_order_id, order_id, position, voucher_code)
SELECT m, $1, i, c FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(m, c, i)
