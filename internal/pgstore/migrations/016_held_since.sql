-- 016_held_since: when the hold a redemption continues began. A
-- replacement (replacesOrderId) keeps the first hold's start, so that the
-- longest hold (MaxHold) bounds the whole chain of replacements, not each
-- link. NULL means created_at: a redemption that replaces nothing, and
-- every row written before this column (added without a default, so the
-- table is not rewritten).
ALTER TABLE voucher_redemption ADD COLUMN held_since timestamptz;
