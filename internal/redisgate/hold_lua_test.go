package redisgate

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// holdFieldNames names the fields of an encoded hold by their constants, as
// holdField in scripts/lib/hold.lua does by their positions.
var holdFieldNames = [holdFields]string{
	fieldState: "state", fieldCustomer: "customerId", fieldOrderAmount: "orderAmount",
	fieldDiscount: "discountAmount", fieldReservedAt: "reservedAtMs", fieldExpiresAt: "expiresAtMs",
	fieldOwner: "owner", fieldCode: "code", fieldReplaces: "replaces", fieldHeldSince: "heldSinceMs",
	fieldWindow: "windowMs",
}

// holdLayout renders the field constants as the layout line the docs show:
// the required fields, then the optional ones, each inside the brackets of
// the one before.
func holdLayout() string {
	s := strings.Join(holdFieldNames[:fieldOwner], "|")
	for _, name := range holdFieldNames[fieldOwner:] {
		s += "[|" + name
	}
	return s + strings.Repeat("]", holdFields-fieldOwner)
}

// holdProbe runs after the hold block and returns, for each ARGV, what the
// block reads from that encoded hold; first the field names by position and
// the state letters, last whether each pattern that reads a field skips the
// fields holdField puts before it.
const holdProbe = `
local names = {}
for name, i in pairs(holdField) do
  names[i] = name
end
local out = {names, {HELD, PENDING, CONFIRMED, RELEASED}}
for _, v in ipairs(ARGV) do
  local state, cust = holdHead(v)
  out[#out + 1] = {holdState(v), state, cust, holdCode(v) or '', holdReplaces(v) or '',
    holdExpiry(v), tostring(holdsUse(holdState(v))), holdAs(v, RELEASED), holdWithExpiry(v, '42')}
end
local function before(i)
  return '%a|' .. string.rep('[^|]*|', i - 2)
end
out[#out + 1] = {
  tostring(holdCodePattern == '^' .. before(holdField.code) .. '([^|]+)'),
  tostring(holdReplacesPattern == '^' .. before(holdField.replaces) .. '([^|]+)'),
  tostring(holdExpiryPattern == '^(' .. before(holdField.expiresAtMs) .. ')(%d+)(.*)$'),
  tostring(holdDiscountPattern == '^(' .. before(holdField.discountAmount) .. ')(%d+)(.*)$'),
  tostring(holdWindowPattern == '^' .. before(holdField.windowMs) .. '(%-?%d+)'),
}
return out
`

// TestHoldLayoutMatchesLua checks that hold.go and scripts/lib/hold.lua
// describe and read one layout: the block's header and hold.go's doc show
// the line the field constants make, the block's holdField numbers the same
// names in the same order, and what the block reads from holds encodeHold
// wrote is what decodeHold reads.
func TestHoldLayoutMatchesLua(t *testing.T) {
	t.Parallel()
	block, err := scriptFS.ReadFile("scripts/lib/hold.lua")
	require.NoError(t, err)
	require.Contains(t, string(block), "\n--   "+holdLayout()+"\n", "the header of lib/hold.lua shows the layout of the field constants")
	goSrc, err := os.ReadFile("hold.go")
	require.NoError(t, err)
	require.Contains(t, string(goSrc), "\n//\t"+holdLayout()+"\n", "hold.go's doc shows the layout of the field constants")

	at := time.Date(2026, 12, 2, 10, 0, 0, 123_000_000, time.UTC)
	full := voucher.Hold{OrderID: "o", CustomerID: "cus_9X:a.b-c@d.e+f", OrderAmount: 250000, DiscountAmount: 100000,
		ReservedAt: at, ExpiresAt: at.Add(15 * time.Minute), Owner: "i-1", Code: "WELCOME-7KQ4", Replaces: "ord-1",
		HeldSince: at.Add(-time.Minute), Window: at.Add(-time.Hour)}
	var states []byte
	var holds []voucher.Hold
	for _, st := range []byte{stateHeld, statePending, stateConfirmed, stateReleased} {
		for _, h := range []voucher.Hold{
			{OrderID: "o", CustomerID: "42"},
			{OrderID: "o", CustomerID: "3", ExpiresAt: at, Owner: "i-1"},
			{OrderID: "o", CustomerID: "3", ExpiresAt: at, Code: "K_1"},
			{OrderID: "o", CustomerID: "3", ReservedAt: at, Owner: "i-1", Replaces: "ord-1"},
			{OrderID: "o", CustomerID: "3", ReservedAt: at, Replaces: "ord-1", HeldSince: at.Add(-time.Second)},
			full,
		} {
			states = append(states, st)
			holds = append(holds, h)
		}
	}
	args := make([]string, len(holds))
	for i, h := range holds {
		args[i] = encodeHold(states[i], h)
	}
	src, err := joinScript(scriptFS, "lib/hold.lua")
	require.NoError(t, err)
	g := newGate(t, Config{})
	res, err := rueidis.NewLuaScript(src+holdProbe).Exec(context.Background(), rawClient(t, g), nil, args).ToArray()
	require.NoError(t, err)
	require.Len(t, res, 3+len(holds))
	patterns, err := res[len(res)-1].AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"true", "true", "true", "true", "true"}, patterns,
		"the patterns of lib/hold.lua (code, replaces, expiresAtMs, discountAmount, windowMs) skip the fields before theirs")

	names, err := res[0].AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, holdFieldNames[:], names, "holdField in lib/hold.lua")
	letters, err := res[1].AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, []string{string(stateHeld), string(statePending), string(stateConfirmed), string(stateReleased)}, letters)

	for i, h := range holds {
		got, err := res[2+i].ToArray()
		require.NoError(t, err)
		require.Len(t, got, 9)
		str := func(j int) string {
			s, err := got[j].ToString()
			require.NoError(t, err)
			return s
		}
		expiry, err := got[5].AsInt64()
		require.NoError(t, err)
		want, err := decodeHold("o", args[i])
		require.NoError(t, err)
		require.Equal(t, h, clearFlags(want), args[i])
		require.Equal(t, string(states[i]), str(0), args[i])
		require.Equal(t, string(states[i]), str(1), args[i])
		require.Equal(t, want.CustomerID, str(2), args[i])
		require.Equal(t, want.Code, str(3), args[i])
		require.Equal(t, want.Replaces, str(4), args[i])
		require.Equal(t, unixMilli(want.ExpiresAt), expiry, args[i])
		require.Equal(t, states[i] != stateReleased, str(6) == "true", args[i])

		released := clearFlags(want)
		released.Released = true
		gotReleased, err := decodeHold("o", str(7))
		require.NoError(t, err, args[i])
		require.Equal(t, released, gotReleased, args[i])
		extended := want
		extended.ExpiresAt = fromUnixMilli(42)
		gotExtended, err := decodeHold("o", str(8))
		require.NoError(t, err, args[i])
		require.Equal(t, extended, gotExtended, args[i])
	}
}

// clearFlags returns h without the flags its state sets.
func clearFlags(h voucher.Hold) voucher.Hold {
	h.Released, h.Pending, h.Confirmed = false, false, false
	return h
}
