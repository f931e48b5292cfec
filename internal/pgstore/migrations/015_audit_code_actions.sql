-- 015_audit_code_actions: the audit trail records a campaign's codes added
-- (add_codes) and read out (export_codes), under the campaign's budget
-- voucher: codes are bearer secrets, so who read them matters as much as
-- who made them.
ALTER TABLE voucher_audit
    DROP CONSTRAINT voucher_audit_action,
    ADD CONSTRAINT voucher_audit_action
        CHECK (action IN ('create', 'patch', 'activate', 'deactivate', 'reconcile', 'add_codes', 'export_codes'));
