-- voucherd_discount is the discount of an order of p_amount minor units
-- under a voucher's discount columns: p_fixed when set, at most p_amount;
-- else p_bp basis points of p_amount rounded down to the minor unit, at most
-- p_cap when set.
-- The product is split so that no step overflows a bigint for any order
-- amount up to 10^15. It is voucher.Discount.Compute; the conformance table
-- checks that they agree.
CREATE OR REPLACE FUNCTION voucherd_discount(p_fixed bigint, p_bp integer, p_cap bigint, p_amount bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_fixed IS NOT NULL THEN least(p_fixed, greatest(p_amount, 0))
        WHEN p_amount <= 0 THEN 0
        ELSE least((p_amount / 10000) * p_bp + (p_amount % 10000) * p_bp / 10000, p_cap)
    END
$$;
