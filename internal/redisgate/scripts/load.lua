-- load.lua: writes a voucher's gate state from a PostgreSQL snapshot, only
-- if the voucher is not loaded yet (the check and the write are one step).
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of the
--                                      orders; incremented, never reset, so that
--                                      no state after this load has the version
--                                      of one before it
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it,
--                                      rebuilt from the held orders' code field
-- KEYS[6] -> voucher:{CODE}:held       string int: orders holding a use
--                                      (lib/held.lua), set to the snapshot's
-- KEYS[7] -> voucher:{CODE}:heldscan   set: a count under way (heldinit.lua),
--                                      deleted: the snapshot's count is exact
-- KEYS[8] -> voucher:{CODE}:freed      hash campaign code -> replaced orderId
--                                      (commit.lua), emptied: a load waits for
--                                      the consumer, so every such order is in
--                                      the snapshot
-- KEYS[9] -> voucher:{CODE}:budget     hash cap, held: the money budget
--                                      (lib/budget.lua), from the snapshot
--
-- ARGV[1] -> expireAt, unix milliseconds: PEXPIREAT of every key
-- ARGV[2] -> remaining: totalLimit - held (never totalLimit alone)
-- ARGV[3] -> n, the number of customers with held uses
-- ARGV[4 .. 3+2n]   -> customerId, held count pairs
-- ARGV[4+2n .. end-3] -> orderId, encoded hold pairs (lib/hold.lua): held (H),
--                      confirmed (C) or released (R); a campaign's hold has
--                      its code
-- ARGV[end-2], ARGV[end-1] -> the money budget: its cap ('0': none) and held,
--                      the discounts of the snapshot's held orders
-- ARGV[end] -> the counts of the occurrences of the voucher's windows,
--              a JSON object windowMs -> count ('' none; lib/budget.lua)
--
-- Returns:
--   1 if the snapshot was written
--   0 if the voucher was already loaded (nothing changed)
--
-- include: load_pairs, budget
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
-- Leftovers of an earlier load (a key evicted or deleted by hand) must not
-- mix with the snapshot. They may be as big as a sale (a count under way is
-- a set of every orderId): freed in the background.
redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[5], KEYS[7], KEYS[8], KEYS[9])

local expireAt = ARGV[1]
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PEXPIREAT', KEYS[1], expireAt)
redis.call('INCR', KEYS[4])
redis.call('PEXPIREAT', KEYS[4], expireAt)

local n = tonumber(ARGV[3])
hsetPairs(KEYS[2], 4, 3 + 2 * n, expireAt)
hsetPairs(KEYS[3], 4 + 2 * n, #ARGV - 3, expireAt)

-- The codes held by held orders: only a campaign's holds carry one, so a
-- voucher writes nothing here.
local held = hsetHeldCodes(KEYS[5], 4 + 2 * n, #ARGV - 3, expireAt)
redis.call('SET', KEYS[6], held)
redis.call('PEXPIREAT', KEYS[6], expireAt)
loadBudget(KEYS[9], ARGV[#ARGV - 2], ARGV[#ARGV - 1], expireAt)
loadWindows(KEYS[9], ARGV[#ARGV], expireAt)
return 1
