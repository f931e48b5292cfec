package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Concurrent lookups share statements; each caller still gets its own
// orderId's row, or NOT_FOUND.
func TestOrderConcurrentLookups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "LOOKA", 1000, 1000)
	newVoucher(t, s, "LOOKB", 1000, 1000)
	var events []voucher.ReservedEvent
	for i := range 300 {
		code := "LOOKA"
		if i%2 == 1 {
			code = "LOOKB"
		}
		events = append(events, event(code, int64(i+1), fmt.Sprintf("look-%d", i)))
	}
	_, err := s.ApplyReserved(ctx, events)
	require.NoError(t, err)

	before := s.Queries()
	errs := concurrently(600, func(i int) error {
		id := fmt.Sprintf("look-%d", i)
		r, err := s.Order(ctx, id)
		if i >= 300 {
			if !voucher.IsCode(err, voucher.CodeReservationNotFound) {
				return fmt.Errorf("%s: want not found, got %v", id, err)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if want := events[i].Redemption(); r != want {
			return fmt.Errorf("%s: got %+v, want %+v", id, r, want)
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Less(t, s.Queries()-before, int64(600), "no lookup was combined with another")

	// A caller that stops waiting gets UNAVAILABLE; the others are unaffected.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Order(cctx, "look-1")
	requireCode(t, err, voucher.CodeUnavailable)
	r, err := s.Order(ctx, "look-1")
	require.NoError(t, err)
	require.Equal(t, "LOOKB", r.VoucherCode)
}
