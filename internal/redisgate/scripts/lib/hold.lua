-- hold.lua (block): the encoding of a hold, the value of a field of the
-- orders hash (voucher:{CODE}:orders, orderId -> encoded hold):
--
--   state|customerId|orderAmount|discountAmount|reservedAtMs|expiresAtMs[|owner[|code[|replaces[|heldSinceMs[|windowMs]]]]]
--
-- hold.go writes and reads the same layout (its field constants);
-- TestHoldLayoutMatchesLua checks that this line, holdField and the
-- functions below agree with it. state is one letter: H held, P pending
-- (Kafka mode: its event is not acknowledged yet), C confirmed, R released
-- (the orderId is used up); H, P and C hold a use. An optional field is
-- written when it or a later one is set, empty when only a later one is:
-- owner is the instance writing the hold to the store (the only one
-- commit.lua lets make it durable; a fencer that took it over,
-- takeover.lua, owns it from then on), code the campaign
-- code of a hold on a campaign's budget, replaces the orderId whose use a
-- replacement took, heldSinceMs when the first hold of a replacement's
-- chain began (no script reads it; every script keeps it), windowMs the
-- start of the occurrence of the voucher's windows the hold was taken in
-- (lib/budget.lua counts the hold against it). No field holds '|'. Fields
-- after windowMs are a later release's: no script reads them, and every
-- script that rewrites a hold keeps them.
--
-- Expects nothing. Defines:
--   HELD, PENDING, CONFIRMED, RELEASED  the state letters
--   holdField                           field name -> position, as above
--   holdState(v)                        v's state letter
--   holdHead(v)                         v's state and customerId, nil if unreadable
--   holdCode(v)                         v's campaign code, nil when it has none
--   holdReplaces(v)                     the orderId v replaced, nil when none
--   holdExpiry(v)                       v's expiresAtMs (a number), nil if unreadable
--   holdAs(v, state)                    v in another state
--   holdWithExpiry(v, ms)               v with expiresAtMs set to ms (a string)
--   holdsUse(state)                     whether a hold in state holds a use
--   holdDiscount(v)                     v's discountAmount (a number), nil if unreadable
--   holdWithDiscount(v, d)              v with discountAmount set to d (a string)
--   holdWindow(v)                       v's windowMs (a string), nil when it has none
--   holdOwner(v)                        v's owner, '' when it has none
--   holdWithOwner(v, owner)             v with owner set to owner
--   ownedOrder(arg)                     an 'orderId|owner' argument's orderId and owner
local HELD, PENDING, CONFIRMED, RELEASED = 'H', 'P', 'C', 'R'

local holdField = {
  state = 1, customerId = 2, orderAmount = 3, discountAmount = 4,
  reservedAtMs = 5, expiresAtMs = 6, owner = 7, code = 8, replaces = 9,
  heldSinceMs = 10, windowMs = 11,
}

-- The patterns that read a field skip the fields before it, each with the
-- '|' that ends it: '%a|' for the state, then '[^|]*|' per field. They are
-- written out, not built from holdField: a script's blocks run again on
-- every call, and building the patterns was a measurable share of each
-- call. TestHoldLayoutMatchesLua checks them against holdField.
local holdHeadPattern = '^(%a)|([^|]*)|'
-- code: 6 fields before it.
local holdCodePattern = '^%a|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|([^|]+)'
-- replaces: 7 fields before it.
local holdReplacesPattern = '^%a|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|([^|]+)'
-- expiresAtMs: 4 fields before it.
local holdExpiryPattern = '^(%a|[^|]*|[^|]*|[^|]*|[^|]*|)(%d+)(.*)$'
-- discountAmount: 2 fields before it.
local holdDiscountPattern = '^(%a|[^|]*|[^|]*|)(%d+)(.*)$'
-- owner: 6 fields before it; a hold of 6 fields has none.
local holdOwnerPattern = '^(%a|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|)([^|]*)(.*)$'
-- windowMs: 9 fields before it.
local holdWindowPattern = '^%a|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|(%-?%d+)'

local function holdState(v)
  return string.sub(v, 1, 1)
end

local function holdHead(v)
  return string.match(v, holdHeadPattern)
end

local function holdCode(v)
  return string.match(v, holdCodePattern)
end

local function holdReplaces(v)
  return string.match(v, holdReplacesPattern)
end

local function holdExpiry(v)
  local _, expires = string.match(v, holdExpiryPattern)
  return expires and tonumber(expires)
end

local function holdAs(v, state)
  return state .. string.sub(v, 2)
end

local function holdWithExpiry(v, ms)
  local head, _, tail = string.match(v, holdExpiryPattern)
  return head .. ms .. tail
end

local function holdsUse(state)
  return state == HELD or state == PENDING or state == CONFIRMED
end

local function holdDiscount(v)
  local _, d = string.match(v, holdDiscountPattern)
  return d and tonumber(d)
end

local function holdWithDiscount(v, d)
  local head, _, tail = string.match(v, holdDiscountPattern)
  return head .. d .. tail
end

local function holdWindow(v)
  return string.match(v, holdWindowPattern)
end

local function holdOwner(v)
  local _, owner = string.match(v, holdOwnerPattern)
  return owner or ''
end

local function holdWithOwner(v, owner)
  local head, _, tail = string.match(v, holdOwnerPattern)
  if head then
    return head .. owner .. tail
  end
  return v .. '|' .. owner
end

local function ownedOrder(arg)
  return string.match(arg, '^([^|]*)|(.*)$')
end
