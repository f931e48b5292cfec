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
-- per row written.
CREATE OR REPLACE FUNCTION voucherd_customer_legacy(p_customer text)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN p_customer ~ '^[1-9][0-9]{0,18}$'
             AND (length(p_customer) < 19 OR p_customer COLLATE "C" <= '9223372036854775807') THEN p_customer::bigint
        ELSE -1 - (hashtextextended(p_customer, 0) & 9223372036854775807)
    END
$$;
