-- flash_vouchers: codes of flash vouchers whose window has not ended before
-- $1 (the reconciliation job walks them).
-- $1 since
SELECT code
FROM voucher
WHERE flash_sale AND ends_at >= $1
ORDER BY code
