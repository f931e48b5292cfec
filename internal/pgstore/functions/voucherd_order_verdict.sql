-- voucherd_order_verdict is the answer to a request for voucher p_code by
-- customer p_customer whose orderId already has redemption r: '' for a
-- replay (it takes nothing), else ORDER_CONFLICT (another voucher or
-- customer) or ORDER_RELEASED. A redemption's code is the campaign code it
-- was made with, else its voucher's. Its facts are voucherd_order_facts.
CREATE OR REPLACE FUNCTION voucherd_order_verdict(r voucher_redemption, p_code text, p_customer text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN coalesce(r.code, r.voucher_code) <> p_code OR r.customer <> p_customer THEN 'ORDER_CONFLICT'
        WHEN r.status = 'RELEASED' THEN 'ORDER_RELEASED'
        ELSE ''
    END
$$;
