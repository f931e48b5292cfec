-- 014_cheaper_format_checks: the format CHECKs of codes, orderIds and
-- customerIds say the same thing without a counted repetition.
--
-- PostgreSQL's regular expression engine runs a bounded repetition such as
-- {1,64} slowly, and these checks run on every row written: the orderId's
-- and the customer's were more than a tenth of a reservation's PostgreSQL
-- CPU (docs/storage.md). The same rule as "no character outside the class"
-- and a length in bytes (every character the class allows is one byte)
-- costs a small fraction of that.
--
-- The new constraints are added NOT VALID: the rows already stored satisfied
-- the equivalent constraint they replace, so scanning them again (under the
-- table's exclusive lock) would prove nothing; every row written from now on
-- is checked as before. TestFormatChecksMatchTheirRegexes checks the
-- equivalence.
ALTER TABLE voucher
    DROP CONSTRAINT voucher_code_format,
    ADD CONSTRAINT voucher_code_format
        CHECK (octet_length(code) BETWEEN 1 AND 32 AND code !~ '[^A-Za-z0-9_-]') NOT VALID;
ALTER TABLE campaign_code
    DROP CONSTRAINT campaign_code_format,
    ADD CONSTRAINT campaign_code_format
        CHECK (octet_length(code) BETWEEN 1 AND 32 AND code !~ '[^A-Za-z0-9_-]') NOT VALID;
ALTER TABLE voucher_redemption
    DROP CONSTRAINT voucher_redemption_order_id_format,
    ADD CONSTRAINT voucher_redemption_order_id_format
        CHECK (octet_length(order_id) BETWEEN 1 AND 64 AND order_id !~ '[^A-Za-z0-9._:-]') NOT VALID,
    DROP CONSTRAINT voucher_redemption_customer_format,
    ADD CONSTRAINT voucher_redemption_customer_format
        CHECK (octet_length(customer) BETWEEN 1 AND 64 AND customer !~ '[^A-Za-z0-9._:@+-]') NOT VALID;
