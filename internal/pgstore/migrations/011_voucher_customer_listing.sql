-- 011_voucher_customer_listing: a voucher's reservations of one customer
-- (GET /vouchers/{code}/reservations?customerId=...) are one range of their
-- own index, in the listing's order. Without it the page walked the
-- customer's rows across every voucher (voucher_redemption_customer_created_idx)
-- and filtered them by voucher: a customer with many redemptions elsewhere
-- made the last page of a short listing read all of them.
CREATE INDEX voucher_redemption_code_customer_created_idx
    ON voucher_redemption (voucher_code, customer, created_at, order_id);
