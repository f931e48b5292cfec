-- audit_insert: one entry of the audit trail, in the caller's transaction.
-- $1 voucher_code, $2 action, $3 key_name, $4 before, $5 after
INSERT INTO voucher_audit (voucher_code, action, key_name, before, after)
VALUES ($1, $2, $3, $4, $5)
