-- keys.lua (block): keeps a voucher's keys together. A key a script creates
-- gets the expiry of the voucher's other keys, so that an old sale leaves
-- Redis as a whole; the version moves with every change of the orders, so
-- that a copy of them (soldOutCache) can tell it is still exact.
--
-- Expects nothing. Defines:
--   shareExpiry(from, ...)         gives each key of ... without an expiry
--                                  the expiry of from, if from has one
--   bumpVersion(versionKey, from)  increments the version and returns it; a
--                                  version created here (a voucher loaded
--                                  before versions existed) gets from's
--                                  expiry
local function shareExpiry(from, ...)
  local ttl = redis.call('PTTL', from)
  if ttl > 0 then
    for _, key in ipairs({...}) do
      if redis.call('PTTL', key) == -1 then
        redis.call('PEXPIRE', key, ttl)
      end
    end
  end
end

local function bumpVersion(versionKey, from)
  local ver = redis.call('INCR', versionKey)
  if ver == 1 then
    shareExpiry(from, versionKey)
  end
  return ver
end
