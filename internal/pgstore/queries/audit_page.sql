-- audit_page: a page of a voucher's audit trail, oldest first, after the
-- entry id $2 (0 for the first page; index voucher_audit_code_idx).
-- $1 voucher_code, $2 after id, $3 limit
SELECT id, voucher_code, action, key_name, at, before, after
FROM voucher_audit
WHERE voucher_code = $1 AND id > $2
ORDER BY id
LIMIT $3
