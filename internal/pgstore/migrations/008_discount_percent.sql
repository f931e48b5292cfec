-- 008_discount_percent: a voucher's discount is a fixed amount or a
-- percentage of the order amount, in basis points (hundredths of a percent,
-- exact: never a float), with an optional cap. Exactly one of
-- discount_amount and discount_percent_bp is set. A redemption keeps the
-- discount computed for its order when it was reserved (voucherd_discount),
-- which a percentage rounded down may make 0 for an order of a few minor
-- units.

ALTER TABLE voucher
    ALTER COLUMN discount_amount DROP NOT NULL,
    ADD COLUMN discount_percent_bp integer,
    ADD COLUMN max_discount_amount bigint,
    ADD CONSTRAINT voucher_discount_one_kind CHECK ((discount_amount IS NULL) <> (discount_percent_bp IS NULL)),
    ADD CONSTRAINT voucher_discount_percent_range CHECK (discount_percent_bp BETWEEN 100 AND 10000),
    ADD CONSTRAINT voucher_max_discount_amount_of_percent
        CHECK (max_discount_amount IS NULL OR (discount_percent_bp IS NOT NULL AND max_discount_amount > 0));

ALTER TABLE voucher_redemption
    DROP CONSTRAINT voucher_redemption_discount_amount_positive,
    ADD CONSTRAINT voucher_redemption_discount_amount_nonnegative CHECK (discount_amount >= 0);
