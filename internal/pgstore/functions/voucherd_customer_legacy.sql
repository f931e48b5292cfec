-- voucherd_customer_legacy is the bigint a customerId is written as in the
-- customer_id columns, which the previous release reads: the id itself when
-- it is the canonical decimal form of a positive bigint (what that release
-- wrote), otherwise a negative stand-in derived from the id, which that
-- release never sends. Only customer (text) identifies a customer.
--
-- NULL gives NULL (every branch does) without declaring STRICT: PostgreSQL
-- inlines a LANGUAGE sql function into the calling statement only when a
-- STRICT declaration matches a strict body, which a CASE is not, and a call
-- that is not inlined runs the body through the SQL-function executor, once
-- per row written. The digits are told without a counted repetition,
-- which PostgreSQL's regular expressions run slowly (docs/storage.md).
CREATE OR REPLACE FUNCTION voucherd_customer_legacy(p_customer text)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN octet_length(p_customer) BETWEEN 1 AND 19 AND p_customer !~ '[^0-9]' AND left(p_customer, 1) <> '0'
             AND (length(p_customer) < 19 OR p_customer COLLATE "C" <= '9223372036854775807') THEN p_customer::bigint
        ELSE -1 - (hashtextextended(p_customer, 0) & 9223372036854775807)
    END
$$;
