-- 023_stacks: several codes on one order, all or none (docs/stacks.md).
--
-- voucher_stacking: a voucher that may be reserved together with others on
-- one order has a row here (no row: not stackable, the default); a stack
-- holds at most one code of each exclusive_group.
CREATE TABLE voucher_stacking (
    voucher_code    text NOT NULL,
    exclusive_group text,

    CONSTRAINT voucher_stacking_pkey PRIMARY KEY (voucher_code),
    CONSTRAINT voucher_stacking_voucher_fkey FOREIGN KEY (voucher_code) REFERENCES voucher (code),
    CONSTRAINT voucher_stacking_group_format CHECK (octet_length(exclusive_group) BETWEEN 1 AND 64)
);

-- voucher_stack: one row per order that presented several codes, written
-- in the transaction that reserves its members; codes in the order given
-- (the order the discounts apply in). Its members are ordinary redemptions
-- (voucher_redemption), one per code: the first under the order's own id,
-- so that no single reservation can take that orderId, the others under
-- derived ids (voucher_stack_member).
CREATE TABLE voucher_stack (
    order_id     text        NOT NULL,
    customer     text        NOT NULL,
    order_amount bigint      NOT NULL,
    codes        text[]      NOT NULL,
    created_at   timestamptz NOT NULL,

    CONSTRAINT voucher_stack_pkey PRIMARY KEY (order_id),
    CONSTRAINT voucher_stack_codes CHECK (cardinality(codes) BETWEEN 1 AND 5)
);

-- voucher_stack_member: the redemption of each code of a stack, by its
-- redemption's order_id; position is the code's place in the stack (1 =
-- the stack's own orderId).
CREATE TABLE voucher_stack_member (
    member_order_id text    NOT NULL,
    order_id        text    NOT NULL,
    position        integer NOT NULL,
    voucher_code    text    NOT NULL,

    CONSTRAINT voucher_stack_member_pkey PRIMARY KEY (member_order_id),
    CONSTRAINT voucher_stack_member_stack_fkey FOREIGN KEY (order_id) REFERENCES voucher_stack (order_id),
    CONSTRAINT voucher_stack_member_position UNIQUE (order_id, position)
);
