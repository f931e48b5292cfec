-- unlock.lua: releases the warm-up lock only if this loader still holds it,
-- so that a loader whose lock expired cannot free another loader's lock.
--
-- KEYS[1] -> voucher:{CODE}:lock       string: the holder's random token
--
-- ARGV[1] -> token
--
-- Returns:
--   1 if the lock was deleted
--   0 if another token (or none) holds it
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
