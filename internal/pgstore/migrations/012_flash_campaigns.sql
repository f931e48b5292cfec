-- 012_flash_campaigns: a campaign's budget may be a flash sale. Its codes
-- are then gated in Redis under the budget's keys (the campaign id), each
-- code held by at most one live order there as here
-- (voucher_redemption_code_live_idx), and written to PostgreSQL after the
-- gate like any flash voucher's reservation, with the code recorded.
ALTER TABLE voucher DROP CONSTRAINT voucher_campaign_not_flash;
