package redisgate

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func TestHoldRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 10, 0, 0, 123_000_000, time.UTC)
	tests := []struct {
		name  string
		state byte
		hold  voucher.Hold
		want  string
	}{
		{"held", stateHeld, voucher.Hold{OrderID: "o", CustomerID: "42", OrderAmount: 250000, DiscountAmount: 100000, ReservedAt: at, ExpiresAt: at.Add(15 * time.Minute)},
			"H|42|250000|100000|1796205600123|1796206500123"},
		{"pending", statePending, voucher.Hold{OrderID: "o", CustomerID: "1", Pending: true}, "P|1|0|0|0|0"},
		{"released", stateReleased, voucher.Hold{OrderID: "o", CustomerID: "9223372036854775807", Released: true}, "R|9223372036854775807|0|0|0|0"},
		{"with its owner", stateHeld, voucher.Hold{OrderID: "o", CustomerID: "3", Owner: "a1b2-c3_d4"}, "H|3|0|0|0|0|a1b2-c3_d4"},
		{"string customer", stateHeld, voucher.Hold{OrderID: "o", CustomerID: "cus_9X:a.b-c@d.e+f"}, "H|cus_9X:a.b-c@d.e+f|0|0|0|0"},
		{"campaign code", stateHeld, voucher.Hold{OrderID: "o", CustomerID: "3", Code: "WELCOME-7KQ4"}, "H|3|0|0|0|0||WELCOME-7KQ4"},
		{"campaign code and owner", statePending, voucher.Hold{OrderID: "o", CustomerID: "3", Owner: "i-1", Code: "K_1", Pending: true},
			"P|3|0|0|0|0|i-1|K_1"},
		{"confirmed", stateConfirmed, voucher.Hold{OrderID: "o", CustomerID: "3", Owner: "i-1", Confirmed: true}, "C|3|0|0|0|0|i-1"},
		{"replacement", statePending, voucher.Hold{OrderID: "o", CustomerID: "3", Owner: "i-1", Replaces: "ord-1", Pending: true},
			"P|3|0|0|0|0|i-1||ord-1"},
		{"replacement with a campaign code", stateHeld, voucher.Hold{OrderID: "o", CustomerID: "3", Code: "K_1", Replaces: "ord-1"},
			"H|3|0|0|0|0||K_1|ord-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := encodeHold(tt.state, tt.hold)
			require.Equal(t, tt.want, s)
			got, err := decodeHold("o", s)
			require.NoError(t, err)
			require.Equal(t, tt.hold, got)
		})
	}
}

func TestDecodeHoldRejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "H", "H|1|2|3|4", "X|1|2|3|4|5", "HH|1|2|3|4|5", "H|a b|2|3|4|5", "H||2|3|4|5", "H|1|x|3|4|5",
		"H|1|2|3|4|5|", "H|1|2|3|4|5|a|b|c|d", "H|1|2|3|4|5|a|b|", "H|1|2|3|4|5|a|b|c d", "H|1|2|3|4|5|||", "H|1|2|3|4|5|a{b}", "H|1|2|3|4|5|a b", "H|1|2|3|4|5|a|", "H|1|2|3|4|5||b c",
		"H|1|2|3|4|5|a b|c"} {
		_, err := decodeHold("o", s)
		require.ErrorIs(t, err, errBadHold, s)
	}
}

func FuzzDecodeHold(f *testing.F) {
	f.Add("H|42|250000|100000|1733130000000|1733130900000")
	f.Add("R|1|0|0|0|0")
	f.Add("P|-1|-2|-3|-4|-5")
	f.Add("H|1|2|3|4|5|owner-1")
	f.Add("C|1|2|3|4|5|owner-1|K_1|ord-1")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := decodeHold("o", s)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a value that decodes the same.
		state := byte(stateHeld)
		switch {
		case h.Pending:
			state = statePending
		case h.Released:
			state = stateReleased
		case h.Confirmed:
			state = stateConfirmed
		}
		again, err := decodeHold("o", encodeHold(state, h))
		require.NoError(t, err)
		require.Equal(t, h, again)
	})
}

// A hold written by a later release, with fields after the ones this
// release knows, decodes as the same hold without them; an empty last field
// is still malformed.
func TestDecodeHoldIgnoresLaterFields(t *testing.T) {
	t.Parallel()
	since := time.UnixMilli(1796205600123).UTC()
	base := voucher.Hold{OrderID: "o", CustomerID: "3", Owner: "i-1", Code: "K_1", Replaces: "ord-1", HeldSince: since, Window: since, Pending: true}
	full := encodeHold(statePending, base)
	require.Len(t, strings.Split(full, "|"), holdFields)
	short := voucher.Hold{OrderID: "o", CustomerID: "3", Owner: "i-1", Code: "K_1", Replaces: "ord-1", Pending: true}
	for s, want := range map[string]voucher.Hold{
		full + "|ord-2": base, full + "|ord-2|x y": base, full + "||later": base,
		"P|3|0|0|0|0|i-1|K_1|ord-1|||ord-2": short,
	} {
		got, err := decodeHold("o", s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{full + "|", full + "|ord-2|", "P|3|0|0|0|0|i-1|K_1|ord-1||x|ord-2"} {
		_, err := decodeHold("o", s)
		require.ErrorIs(t, err, errBadHold, s)
	}
}
