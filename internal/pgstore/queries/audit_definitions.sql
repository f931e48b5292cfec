-- audit_definitions: the definition changes of a voucher made after $2,
-- oldest first (index voucher_audit_code_idx; a voucher has few). Each
-- records the definition before (NULL for a create) and after.
-- $1 voucher_code, $2 since
SELECT at, before, after
FROM voucher_audit
WHERE voucher_code = $1 AND action IN ('create', 'patch', 'activate', 'deactivate') AND at > $2
ORDER BY id
