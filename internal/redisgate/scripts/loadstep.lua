-- loadstep.lua: writes a voucher's gate state from a PostgreSQL snapshot in
-- steps, for a snapshot too big for load.lua to write in one short script.
-- The hashes are written to staging keys and moved into place (RENAME,
-- O(1)) with remaining last, in the final step: until then the voucher is
-- not loaded and its hashes are not there, so no script sees a half-loaded
-- voucher. One loader at a time: the first step takes voucher:{CODE}:loading
-- with the loader's token, every step checks and refreshes it.
--
-- KEYS[1]  -> voucher:{CODE}:remaining    string int: uses left, written last
-- KEYS[2]  -> voucher:{CODE}:users        hash customerId -> held count
-- KEYS[3]  -> voucher:{CODE}:orders       hash orderId -> encoded hold
-- KEYS[4]  -> voucher:{CODE}:version      string int: incremented when done (as load.lua)
-- KEYS[5]  -> voucher:{CODE}:codes        hash campaign code -> orderId holding it
-- KEYS[6]  -> voucher:{CODE}:held         string int: orders holding a use (lib/held.lua)
-- KEYS[7]  -> voucher:{CODE}:heldscan     set: a count under way, deleted
-- KEYS[8]  -> voucher:{CODE}:freed        hash, deleted (as load.lua)
-- KEYS[9]  -> voucher:{CODE}:loading      string: the token of the loader writing
-- KEYS[10] -> voucher:{CODE}:loadusers    staging copy of users
-- KEYS[11] -> voucher:{CODE}:loadorders   staging copy of orders
-- KEYS[12] -> voucher:{CODE}:loadcodes    staging copy of codes
-- KEYS[13] -> voucher:{CODE}:budget       hash cap, held: the money budget
--                                         (lib/budget.lua), written by finish
--
-- ARGV[1] -> step: 'begin', 'part' or 'finish'
-- ARGV[2] -> the loader's token
-- ARGV[3] -> expireAt, unix milliseconds: PEXPIREAT of every key written
-- ARGV[4] -> the loading key's time to live, milliseconds (refreshed by
--            every step)
-- begin:  nothing more; drops leftovers of the voucher's keys (UNLINK)
-- part:   ARGV[5] n, the number of customers in this part;
--         ARGV[6 .. 5+2n] customerId, held count pairs;
--         ARGV[6+2n .. end] orderId, encoded hold pairs (lib/hold.lua): held
--         (H), confirmed (C) or released (R); a campaign's hold has its code
-- finish: ARGV[5] remaining (totalLimit - held), ARGV[6] held, ARGV[7] and
--         ARGV[8] the money budget's cap ('0': none) and held, ARGV[9] the
--         occurrences' counts (as load.lua)
--
-- Returns:
--   1  the step was done (finish: the voucher is loaded)
--   0  the voucher is loaded already (nothing changed; a begin of another
--      loader's token is answered 2 first)
--   2  another loader holds the loading key (begin), or this loader lost it
--      (part, finish): nothing changed
--
-- include: load_pairs, budget
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local step, token, expireAt = ARGV[1], ARGV[2], ARGV[3]
local holder = redis.call('GET', KEYS[9])
if step == 'begin' then
  if holder and holder ~= token then
    return 2
  end
  redis.call('SET', KEYS[9], token, 'PX', ARGV[4])
  redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[10], KEYS[11], KEYS[12], KEYS[13])
  return 1
end
if holder ~= token then
  return 2
end
redis.call('PEXPIRE', KEYS[9], ARGV[4])

if step == 'part' then
  local n = tonumber(ARGV[5])
  hsetPairs(KEYS[10], 6, 5 + 2 * n, expireAt)
  hsetPairs(KEYS[11], 6 + 2 * n, #ARGV, expireAt)
  hsetHeldCodes(KEYS[12], 6 + 2 * n, #ARGV, expireAt)
  return 1
end

-- finish: move the staging hashes into place, then publish remaining.
local moves = {{KEYS[10], KEYS[2]}, {KEYS[11], KEYS[3]}, {KEYS[12], KEYS[5]}}
for _, m in ipairs(moves) do
  -- RENAME would free a key in its place in this step: UNLINK frees it in
  -- the background (begin dropped it; this covers one written since).
  redis.call('UNLINK', m[2])
  if redis.call('EXISTS', m[1]) == 1 then
    redis.call('RENAME', m[1], m[2])
  end
end
redis.call('UNLINK', KEYS[7], KEYS[8])
redis.call('SET', KEYS[6], ARGV[6])
redis.call('PEXPIREAT', KEYS[6], expireAt)
redis.call('INCR', KEYS[4])
redis.call('PEXPIREAT', KEYS[4], expireAt)
loadBudget(KEYS[13], ARGV[7], ARGV[8], expireAt)
loadWindows(KEYS[13], ARGV[9], expireAt)
redis.call('SET', KEYS[1], ARGV[5])
redis.call('PEXPIREAT', KEYS[1], expireAt)
redis.call('DEL', KEYS[9])
return 1
