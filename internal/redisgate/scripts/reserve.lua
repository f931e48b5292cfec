-- reserve.lua: checks and takes one use of a voucher for each of one or more
-- orderIds, each in one atomic step (idempotency by orderId, the campaign
-- code, per-customer quota, remaining count), one after the other in the
-- order given: a call of n takes answers each as n calls of one would, in
-- that order, and nothing else runs between them.
--
-- KEYS[1] -> voucher:{CODE}:remaining  string int: uses left
-- KEYS[2] -> voucher:{CODE}:users      hash customerId -> held count
-- KEYS[3] -> voucher:{CODE}:orders     hash orderId -> encoded hold
-- KEYS[4] -> voucher:{CODE}:version    string int: bumped by every change of the orders
-- KEYS[5] -> voucher:{CODE}:codes      hash campaign code -> orderId holding it
--                                      (a campaign's budget, CODE its id)
-- KEYS[6] -> voucher:{CODE}:held       string int: orders holding a use (lib/held.lua)
-- KEYS[7] -> voucher:{CODE}:heldscan   set: orderIds counted while heldinit.lua counts
-- KEYS[8] -> voucher:{CODE}:void       hash "orderId token" -> 1, voided attempts (void.lua)
-- KEYS[9] -> voucher:{CODE}:budget     hash cap, held: the money budget (lib/budget.lua)
--
-- ARGV holds one group of 8 per take; the take of group g (from 0) reads
-- ARGV[8g+1] to ARGV[8g+8] as ARGV[1] to ARGV[8] below (orderId,
-- customerId, perUserLimit, encoded, code, token, budget and windowQuota
-- in the script):
--
-- ARGV[1] -> orderId
-- ARGV[2] -> customerId (voucher.ValidCustomerID: never '|'); compared as a string; an int64 does
--            not fit a Lua number
-- ARGV[3] -> perUserLimit
-- ARGV[4] -> encoded hold to store (lib/hold.lua), held (H), or pending (P) in
--            Kafka mode; its code field is ARGV[5]
-- ARGV[5] -> the campaign code presented, '' for a voucher
-- ARGV[6] -> this attempt's token (lib/void.lua)
-- ARGV[7] -> the money budget as the caller's definition has it: '' none,
--            'reject' or 'clip' (voucher.Budget.Clip)
-- ARGV[8] -> the quota per occurrence of the voucher's windows as the
--            caller's definition has it ('' none); the hold's windowMs
--            names its occurrence (lib/budget.lua)
--
-- Returns one reply per take, in ARGV's order, each {status, remaining} or
-- {status, remaining, stored hold or version}:
--   {1, remaining, ver}   taken: a use was taken; remaining is after the take,
--                         ver the version after the call (its first take
--                         bumps it, once for the call: nothing reads the
--                         orders between its takes)
--   {2, remaining, hold}  replay: orderId holds a use (H or P) for this customer
--                         and this code
--   {3, remaining, hold}  conflict: orderId is known with another customer or
--                         another campaign code
--   {4, remaining, hold}  released: orderId was released (R marker)
--   {5, 0}                not loaded: the remaining key is absent
--   {6, remaining}        quota held: the customer holds perUserLimit uses
--   {7, remaining, ver}   sold out: no use left; ver is the version, '' if absent
--   {9, remaining}        code used: the campaign code is held by another order
--   {10, remaining}       voided: this attempt of an unknown orderId was voided
--   {11, remaining, left, ver}  budget: the hold's discount does not fit what
--                         is left of the money budget (left, a string); ver
--                         as for sold out
--   {1, remaining, ver, discount}  taken with the discount clipped to what
--                         was left of the budget (a string)
--   {12, remaining}       window full: the hold's occurrence holds ARGV[8]
--                         uses (or the hold names none)
-- A voucher with a budget (ARGV[7] set) whose budget key is absent is not
-- loaded: {5, 0}.
-- remaining is -1 where it is unknown (a known orderId of an unloaded voucher).
-- The version lets the caller's sold-out cache keep its copy of the orders
-- when nothing changed.
--
-- include: hold, known_order, take_checks, keys, held, void, budget

-- What the takes of one call read once and then keep current themselves,
-- as nothing else runs between them: the remaining key's value (false:
-- absent), whether the void hash exists and how many of the users and
-- orders hashes do (no take writes the void hash; a take's writes create
-- the other two), which of the held counter's keys exist (heldKeys; no take
-- creates or deletes them), and whether the budget has a cap (no take
-- writes it). nil: not read yet.
local remaining = redis.call('GET', KEYS[1])
local voids, hashes, heldState, capped
-- The version after the call's takes, once its first take bumped it, and
-- as the replies carry it.
local version, versionText

-- The orders hash's value of every orderId of the call and the users
-- hash's count of every customer, read by one HMGET each before the first
-- take. A take reads its orderId and its customer here, and a take keeps
-- both current: stored[orderId] is the hold it took (false: absent),
-- counts[customerId] the customer's held count (a number).
local stored, counts = {}, {}
do
  local orderIds, customerIds = {}, {}
  for o = 0, #ARGV - 8, 8 do
    orderIds[#orderIds + 1] = ARGV[o + 1]
    customerIds[#customerIds + 1] = ARGV[o + 2]
  end
  local holds = redis.call('HMGET', KEYS[3], unpack(orderIds))
  local held = redis.call('HMGET', KEYS[2], unpack(customerIds))
  for i = 1, #orderIds do
    if stored[orderIds[i]] == nil then
      stored[orderIds[i]] = holds[i]
    end
    if counts[customerIds[i]] == nil then
      counts[customerIds[i]] = tonumber(held[i] or '0')
    end
  end
end

-- The writes of the remaining count, the users and orders hashes and the
-- held count are made once, after the last take (write): the uses taken,
-- the customers whose count changed (in order, each once), the orderId and
-- hold pairs taken, what the held count gains (while heldinit.lua is not
-- counting: otherwise each take counts itself at once), and whether a take
-- created the users and orders hashes.
local taken, heldGain, created = 0, 0, false
local changed, isChanged, holdPairs = {}, {}, {}

local function take(o)
  local orderId, customerId, perUserLimit, encoded, code, token, budget, windowQuota = unpack(ARGV, o + 1, o + 8)
  local known, r = knownHold(stored[orderId], customerId, code, remaining)
  if known then
    return known
  end
  -- One EXISTS for two facts, read before anything is written: whether
  -- the void hash exists (it is named three times, so the count is 3 or
  -- more exactly when it does), and whether the users and orders hashes
  -- both exist (the rest of the count). A take into hashes that exist
  -- reads no expiry, and an attempt is looked up in the void hash only
  -- when there is one.
  if voids == nil then
    local n = redis.call('EXISTS', KEYS[8], KEYS[8], KEYS[8], KEYS[2], KEYS[3])
    voids = n >= 3
    hashes = voids and n - 3 or n
  end
  if voids and voided(KEYS[8], orderId, token) then
    return {10, r}
  end
  local refused = refuseTakeHeld(KEYS[5], counts[customerId], perUserLimit, code, r)
  if refused then
    if refused[1] == 7 then
      -- Sold out: with the version, for the caller's sold-out cache.
      refused[3] = redis.call('GET', KEYS[4]) or ''
    end
    return refused
  end

  local hold, clipped, last9 = encoded, nil, false
  if budget ~= '' then
    local left = budgetLeft(KEYS[9])
    if not left then
      return {5, 0}
    end
    local want = holdDiscount(hold)
    local d = fitBudget(left, want, budget == 'clip')
    if not d then
      return {11, r, tostring(left), redis.call('GET', KEYS[4]) or ''}
    end
    if d ~= want then
      hold, clipped = holdWithDiscount(hold, tostring(d)), tostring(d)
    end
  end

  if windowQuota ~= '' then
    local w = holdWindow(hold)
    if not w or windowHeld(KEYS[9], w) >= tonumber(windowQuota) then
      return {12, r}
    end
    last9 = true
  end

  -- The users and orders hashes may be created by this call (a voucher
  -- loaded with no holds, or whose last customer gave everything back):
  -- hashes, read above, tells. An existing hash has the voucher's expiry
  -- already: the loads set it, and every script that creates one shares it.
  created = created or hashes < 2
  hashes = 2
  r = r - 1
  remaining = r
  taken = taken + 1
  counts[customerId] = counts[customerId] + 1
  if not isChanged[customerId] then
    isChanged[customerId] = true
    changed[#changed + 1] = customerId
  end
  stored[orderId] = hold
  holdPairs[#holdPairs + 1] = orderId
  holdPairs[#holdPairs + 1] = hold
  heldState = heldState or heldKeys(KEYS[6], KEYS[7])
  if heldState == 2 then
    heldGain = heldGain + 1
  else
    countHeldIn(heldState, KEYS[6], KEYS[7], orderId, false, true)
  end
  capped = countBudget(KEYS[9], hold, false, true, capped)
  -- A version created here (a voucher loaded before versions existed) gets
  -- the expiry too (bumpVersion).
  if not version then
    version = bumpVersion(KEYS[4], KEYS[1])
    versionText = tostring(version)
  end

  -- Created keys get the expiry of the remaining key, so that an old sale
  -- leaves Redis as a whole. The codes hash and the budget hash are checked
  -- whenever a take writes them (unreplace.lua may recreate the codes hash
  -- without an expiry); the users and orders hashes once written (write).
  local unsure = {}
  if code ~= '' then
    redis.call('HSET', KEYS[5], code, orderId)
    unsure[#unsure + 1] = KEYS[5]
  end
  if last9 then
    unsure[#unsure + 1] = KEYS[9]
  end
  if #unsure > 0 then
    shareExpiry(KEYS[1], unpack(unsure))
  end
  if clipped then
    return {1, r, versionText, clipped}
  end
  return {1, r, versionText}
end

-- write makes the takes' writes of the remaining count, the users and
-- orders hashes and the held count, one command each.
local function write()
  if taken == 0 then
    return
  end
  redis.call('DECRBY', KEYS[1], taken)
  local held = {}
  for _, c in ipairs(changed) do
    held[#held + 1] = c
    held[#held + 1] = counts[c]
  end
  redis.call('HSET', KEYS[2], unpack(held))
  redis.call('HSET', KEYS[3], unpack(holdPairs))
  if heldGain > 0 then
    redis.call('INCRBY', KEYS[6], heldGain)
  end
  if created then
    shareExpiry(KEYS[1], KEYS[2], KEYS[3])
  end
end

local out = {}
for o = 0, #ARGV - 8, 8 do
  out[#out + 1] = take(o)
end
write()
return out
