-- extend.lua: sets the expiry recorded in an orderId's hold (H, P or C) to a
-- later one, so that a replay answers with the expiry the database has
-- after a hold extension. A released marker, an unknown orderId or an
-- earlier expiry is left as it is.
--
-- KEYS[1] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[2] -> voucher:{CODE}:version    string int: bumped by every change of the orders
--
-- ARGV[1] -> orderId
-- ARGV[2] -> new expiresAt, unix milliseconds
--
-- Returns:
--   1 if the hold's expiry changed
--   0 otherwise
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then
  return 0
end
local state = string.sub(stored, 1, 1)
if state ~= 'H' and state ~= 'P' and state ~= 'C' then
  return 0
end
-- The expiry is the sixth field; an owner may follow it (hold.go).
local head, expires, tail = string.match(stored, '^(%a|[^|]*|[^|]*|[^|]*|[^|]*|)(%d+)(.*)$')
if not head or tonumber(expires) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], head .. ARGV[2] .. tail)
if redis.call('INCR', KEYS[2]) == 1 then
  -- Created here (loaded before versions existed): the voucher's expiry.
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
return 1
