-- apply_reserved: write gate reservations idempotently
-- (voucherd_apply_reserved_codes). Parallel arrays, one element per event.
-- $1 order_ids, $2 codes, $3 customers, $4 order_amounts,
-- $5 discount_amounts, $6 reserved_at, $7 expires_at, $8 campaign codes
-- ('' for a voucher's event), $9 the occurrences' starts (NULL: none)
SELECT o_order_id, o_inserted, o_voucher_code, o_customer
FROM voucherd_apply_reserved_codes($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
                                   $6::timestamptz[], $7::timestamptz[], $8::text[], $9::timestamptz[])
