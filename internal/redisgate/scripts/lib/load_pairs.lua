-- load_pairs.lua (block): writing a snapshot's pairs from ARGV into the
-- gate's hashes, as load.lua (at once) and loadstep.lua (part by part) do.
--
-- include: hold
--
-- Expects the hold block. Defines:
--   hsetPairs(key, from, to, expireAt)      HSET of ARGV[from..to] (field,
--                                           value pairs) in chunks, then
--                                           PEXPIREAT key expireAt; nothing
--                                           for an empty range
--   hsetHeldCodes(key, from, to, expireAt)  for the orders of ARGV[from..to]
--                                           (orderId, hold pairs), HSET of
--                                           the code each held or confirmed
--                                           hold carries -> its orderId, in
--                                           chunks, then PEXPIREAT key if it
--                                           exists; returns the number of
--                                           orders holding a use
--
-- HSET in chunks: one call per field is slow for big sales, one call for all
-- of them would overflow the Lua stack in unpack.
local loadChunk = 256

local function hsetPairs(key, from, to, expireAt)
  if to < from then
    return
  end
  local i = from
  while i <= to do
    local j = math.min(i + loadChunk - 1, to)
    redis.call('HSET', key, unpack(ARGV, i, j))
    i = j + 1
  end
  redis.call('PEXPIREAT', key, expireAt)
end

local function hsetHeldCodes(key, from, to, expireAt)
  local codes = {}
  local held = 0
  for i = from, to - 1, 2 do
    local v = ARGV[i + 1]
    local state = holdState(v)
    if holdsUse(state) then
      held = held + 1
    end
    if state == HELD or state == CONFIRMED then
      local code = holdCode(v)
      if code then
        codes[#codes + 1] = code
        codes[#codes + 1] = ARGV[i]
        if #codes >= loadChunk then
          redis.call('HSET', key, unpack(codes))
          codes = {}
        end
      end
    end
  end
  if #codes > 0 then
    redis.call('HSET', key, unpack(codes))
  end
  if redis.call('EXISTS', key) == 1 then
    redis.call('PEXPIREAT', key, expireAt)
  end
  return held
end
