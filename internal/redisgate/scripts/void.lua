-- void.lua: settles one reservation attempt whose call got no answer (it
-- timed out or lost its connection, so its script may or may not have run,
-- and may still run). In one step: the orderId's stored hold is returned
-- when the gate knows it, and the caller decides from it; otherwise the
-- attempt is recorded as voided, so that its script, should it reach Redis
-- later, takes nothing (lib/void.lua, checked by reserve.lua and
-- replace.lua).
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[3] -> voucher:{CODE}:void       hash "orderId token" -> 1, one field per voided attempt
--
-- ARGV[1] -> orderId
-- ARGV[2] -> the attempt's token (its hold's reservedAt, unix milliseconds)
-- ARGV[3] -> how long the voided attempts of the voucher are kept, in ms
--
-- Returns:
--   the encoded hold (lib/hold.lua), in any state, when the orderId is known
--   nil after recording the void (also for a voucher not loaded: a script
--     that arrives after a load must take nothing either)
if redis.call('EXISTS', KEYS[1]) == 1 then
  local stored = redis.call('HGET', KEYS[2], ARGV[1])
  if stored then
    return stored
  end
end
redis.call('HSET', KEYS[3], ARGV[1] .. ' ' .. ARGV[2], 1)
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return false
