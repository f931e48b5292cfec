-- campaign_codes_import: move the staged import (campaign_code_import, filled
-- by COPY with each element's 1-based position n, its code and its customer)
-- into campaign $1, and answer every element not added, with its verdict:
--   DUPLICATE        the code appears earlier in the same import;
--   EXISTS           already a code of this campaign, for the same customer
--                    (or none): nothing to do, the import is idempotent;
--   CUSTOMER_DIFFERS already a code of this campaign, for another customer;
--   CODE_TAKEN       another campaign's code, or a voucher's.
-- Every other element is inserted. The caller holds
-- voucherd_code_namespace_lock, so no insert can conflict.
-- $1 campaign id
WITH s AS (
    SELECT i.n, i.code, i.customer, min(i.n) OVER (PARTITION BY i.code) AS first
    FROM campaign_code_import i
), d AS (
    SELECT s.n, s.code, s.customer,
           CASE
               WHEN s.n <> s.first THEN 'DUPLICATE'
               WHEN c.campaign_id = $1 AND c.customer IS NOT DISTINCT FROM s.customer THEN 'EXISTS'
               WHEN c.campaign_id = $1 THEN 'CUSTOMER_DIFFERS'
               WHEN c.code IS NOT NULL OR v.code IS NOT NULL THEN 'CODE_TAKEN'
               ELSE ''
           END AS verdict
    FROM s
    LEFT JOIN campaign_code c ON c.code = s.code
    LEFT JOIN voucher v ON v.code = s.code
), ins AS (
    INSERT INTO campaign_code (code, campaign_id, customer)
    SELECT d.code, $1, d.customer FROM d WHERE d.verdict = ''
)
SELECT d.n, d.code, d.verdict FROM d WHERE d.verdict <> '' ORDER BY d.n
