-- heldinit.lua: counts the held count of a voucher that has none (loaded
-- before the count existed, or its key lost), one chunk of the orders hash
-- per call, so that no call holds Redis for long. The caller starts at
-- cursor '0' and calls again with the cursor returned until it is done.
--
-- The first call creates held at 0 and heldscan holding HELD_SCANNING; from
-- then on the scripts that change an order's use keep the count
-- (lib/held.lua). Each chunk counts the orders it reads that nobody counted
-- yet (SADD to heldscan) at their state now. An orderId present for the
-- whole scan is read by it (HSCAN's guarantee); one that came or changed
-- meanwhile was counted by the script that changed it. So once any full
-- scan begun after the first call ends, every order is counted once and
-- the count is exact: heldscan is dropped (UNLINK: freed in the
-- background). Scans of several callers at once are safe: an order is
-- counted only by whoever adds it to heldscan.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[3] -> voucher:{CODE}:held       string int: orders holding a use
-- KEYS[4] -> voucher:{CODE}:heldscan   set: orderIds counted so far
--
-- ARGV[1] -> cursor, '0' to start
-- ARGV[2] -> chunk size (HSCAN COUNT)
--
-- Returns:
--   {0, '0'}      the voucher is not loaded
--   {1, '0'}      the count is exact (now or already)
--   {2, cursor}   call again with cursor
--
-- include: hold, keys, held
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, '0'}
end
local cursor = ARGV[1]
if redis.call('EXISTS', KEYS[3]) == 0 then
  -- A start: a cursor of an earlier count means nothing now.
  redis.call('UNLINK', KEYS[4])
  redis.call('SET', KEYS[3], 0)
  redis.call('SADD', KEYS[4], HELD_SCANNING)
  shareExpiry(KEYS[1], KEYS[3], KEYS[4])
  cursor = '0'
elseif redis.call('EXISTS', KEYS[4]) == 0 then
  return {1, '0'}
end
local res = redis.call('HSCAN', KEYS[2], cursor, 'COUNT', ARGV[2])
local fields = res[2]
local n = 0
-- Checked and added 256 orderIds a call: one call per orderId costs more
-- than the counting, all of them in one call could overflow unpack.
local step = 512
for i = 1, #fields - 1, step do
  local ids, values = {}, {}
  for j = i, math.min(i + step - 1, #fields - 1), 2 do
    ids[#ids + 1] = fields[j]
    values[#values + 1] = fields[j + 1]
  end
  local counted = redis.call('SMISMEMBER', KEYS[4], unpack(ids))
  local new = {}
  for j, c in ipairs(counted) do
    if c == 0 then
      new[#new + 1] = ids[j]
      if holdsUse(holdState(values[j])) then
        n = n + 1
      end
    end
  end
  if #new > 0 then
    redis.call('SADD', KEYS[4], unpack(new))
  end
end
if n > 0 then
  redis.call('INCRBY', KEYS[3], n)
end
if res[1] == '0' then
  redis.call('UNLINK', KEYS[4])
  return {1, '0'}
end
return {2, res[1]}
