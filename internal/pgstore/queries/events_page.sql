-- events_page: a page of the feed after seq $1, oldest first, optionally of
-- one type ($2, '' for any) and one voucher ($3, '' for any); each filter
-- reads its own partial index in seq order.
-- $1 after seq, $2 type, $3 voucher code, $4 limit
SELECT seq, type, voucher_code, created_at, data
FROM voucherd_event
WHERE seq IS NOT NULL AND seq > $1
  AND ($2 = '' OR type = $2)
  AND ($3 = '' OR voucher_code = $3)
ORDER BY seq
LIMIT $4
