-- campaign_lock: lock a campaign row while codes are added to it, so that
-- its code_count counts every code.
-- $1 id
SELECT 1 FROM campaign WHERE id = $1 FOR NO KEY UPDATE
