package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func stdJSON(t *testing.T, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return buf.Bytes()
}

// TestHandEncodersMatchEncodingJSON: the answers written without
// encoding/json are byte for byte what it writes.
func TestHandEncodersMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	secs := int64(734)
	next := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	nextFrac := time.Date(2026, 12, 7, 12, 0, 0, 500_000_000, time.UTC)
	for _, e := range []errorJSON{
		{Error: "HELD_OUT", Message: "w", RetryAfter: &secs, Limit: "window", NextWindowAt: &next},
		{Error: "NOT_ELIGIBLE", Message: "o", Reason: "OUTSIDE_WINDOW", NextWindowAt: &nextFrac},
		{Error: "HELD_OUT", Message: "voucher F has no free uses", RetryAfter: &secs},
		{Error: "NOT_ELIGIBLE", Message: "too low", Reason: "ORDER_AMOUNT_TOO_LOW"},
		{Error: "UNAVAILABLE", Message: "x", OutcomeUnknown: true},
		{Error: "BUDGET_EXCEEDED", Message: "b", RetryAfter: &secs, Limit: "budget", BudgetRemaining: &secs},
		{Error: "ALREADY_USED", Message: "q", Limit: "perUser"},
		{Error: "INVALID_REQUEST", Message: "unknown field \"<a&b>\" \\ \n\t\u2028 é \x01"},
		{Error: "INVALID_REQUEST", Message: string([]byte{'a', 0xff, 'b'})},
	} {
		require.Equal(t, string(stdJSON(t, e)), string(e.appendJSON(nil)))
	}
	for _, r := range []reservationJSON{
		{OrderID: "o-1", DiscountAmount: 100, Status: "RESERVED", ExpiresAt: time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)},
		{OrderID: "a.b:c_d", DiscountAmount: 1e15, Status: "CONFIRMED", ExpiresAt: time.Date(2026, 12, 3, 19, 0, 0, 123456000, time.UTC)},
		{OrderID: "o-2", DiscountAmount: 7, Status: "RESERVED", ExpiresAt: time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC), Clipped: true},
	} {
		require.Equal(t, string(stdJSON(t, r)), string(r.appendJSON(nil)))
	}
}

// TestSharedStockErrorEncodedOnce: a shared HELD_OUT error is encoded once,
// and another error gets its own encoding.
func TestSharedStockErrorEncodedOnce(t *testing.T) {
	t.Parallel()
	a := voucher.HeldOut("A", 90*time.Second)
	first := encodeError(a, 409)
	require.Same(t, first, encodeError(a, 409))
	require.Equal(t, []string{"90"}, first.retryAfter)
	require.JSONEq(t, `{"error":"HELD_OUT","message":"voucher A has no free uses; some are held by reservations that may still be released","retryAfter":90,"limit":"total"}`, string(first.body))
	b := voucher.HeldOut("A", 91*time.Second)
	require.Equal(t, []string{"91"}, encodeError(b, 409).retryAfter)
	internal := encodeError(&voucher.Error{Code: voucher.CodeInternal, Message: "secret"}, 500)
	require.Contains(t, string(internal.body), `"message":"internal error"`)
	require.Equal(t, []string{"1"}, encodeError(voucher.Unavailable(nil, "down"), 503).retryAfter)
}
