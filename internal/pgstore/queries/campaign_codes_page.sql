-- campaign_codes_page: up to $3 codes of campaign $1 after code $2 in byte
-- order (campaign_code_campaign_idx), each with whether a live redemption
-- holds it (voucher_redemption_code_live_idx), and the customer it serves
-- ('' for every customer).
-- $1 campaign id, $2 after code ('' for the first page), $3 limit
SELECT c.code,
       EXISTS (SELECT 1 FROM voucher_redemption r WHERE r.code = c.code AND r.status <> 'RELEASED'),
       coalesce(c.customer, '')
FROM campaign_code c
WHERE c.campaign_id = $1 AND c.code COLLATE "C" > $2::text COLLATE "C"
ORDER BY c.code COLLATE "C"
LIMIT $3
