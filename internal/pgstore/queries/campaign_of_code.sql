-- campaign_of_code: the campaign a code belongs to.
-- $1 code
SELECT campaign_id FROM campaign_code WHERE code = $1
