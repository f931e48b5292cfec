-- campaign_codes_add: move the staged codes (campaign_code_staging, filled
-- by COPY) into campaign $1, dropping those that repeat a code of any
-- campaign or a voucher's code; the caller holds
-- voucherd_code_namespace_lock and counts the rows inserted.
-- $1 campaign id
INSERT INTO campaign_code (code, campaign_id)
SELECT s.code, $1 FROM campaign_code_staging s
WHERE NOT EXISTS (SELECT 1 FROM voucher v WHERE v.code = s.code)
ON CONFLICT DO NOTHING
