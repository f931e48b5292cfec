package voucher

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingStore is a fakeStore whose Voucher, the read with the live
// counts, waits until the test ends: counting the held redemptions of a
// voucher of a million holds takes seconds while reconciliation walks the
// same rows. Its VoucherDefinition (fakeStore's) answers at once.
type countingStore struct {
	fakeStore
	counts  atomic.Int64
	release chan struct{}
}

func (s *countingStore) Voucher(ctx context.Context, code string) (Voucher, error) {
	s.counts.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
		return Voucher{}, Unavailable(ctx.Err(), "the count was cut short")
	}
	return s.fakeStore.Voucher(ctx, code)
}

// A reservation that finds its voucher's cached definition expired reads
// it again without the live counts: whatever a count of the voucher's
// redemptions costs (seconds, at a million holds under reconciliation),
// no reservation waits for one, neither the one that re-reads after a TTL
// nor those past two TTLs, which re-read too.
func TestReservationsNeverCountRedemptions(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	st := &countingStore{fakeStore: fakeStore{voucher: flashVoucher()}, release: make(chan struct{})}
	t.Cleanup(func() { close(st.release) })
	g := &fakeGate{decision: GateDecision{Outcome: GateTaken, Remaining: 9}}
	svc, err := NewService(ServiceConfig{Store: st, Gate: g, VoucherCacheTTL: time.Second, Clock: clock})
	require.NoError(t, err)

	// Well below the seconds a count may take, well above a reservation
	// against fakes on a loaded machine.
	const bound = 2 * time.Second
	reserve := func(orderID string) error {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		_, err := svc.Reserve(ctx, reserveReq(orderID))
		return err
	}
	require.NoError(t, reserve("first")) // caches the definition
	for _, age := range []time.Duration{1500 * time.Millisecond, 2500 * time.Millisecond} {
		now.Add(int64(age))
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			wg.Go(func() { errs[i] = reserve(fmt.Sprintf("o-%s-%d", age, i)) })
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "reservation %d, definition %s old", i, age)
		}
	}
	require.Zero(t, st.counts.Load(), "a reservation read the voucher's live counts")
}

// pagesStore is a countingStore that answers one empty page of a
// voucher's redemptions and of its audit trail.
type pagesStore struct {
	countingStore
}

func (s *pagesStore) ListRedemptions(context.Context, RedemptionFilter) (RedemptionPage, error) {
	return RedemptionPage{}, nil
}

func (s *pagesStore) Audit(context.Context, string, PageRequest) (AuditPage, error) {
	return AuditPage{}, nil
}

// A page of a voucher's reservations or of its audit trail reads the
// voucher's definition, not its live counts: at a million holds the count
// alone takes seconds, for a page of a hundred rows.
func TestPagesNeverCountRedemptions(t *testing.T) {
	t.Parallel()
	st := &pagesStore{countingStore{fakeStore: fakeStore{voucher: flashVoucher()}, release: make(chan struct{})}}
	t.Cleanup(func() { close(st.release) })
	svc, err := NewService(ServiceConfig{Store: st})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = svc.ListReservations(ctx, RedemptionFilter{Code: "FLASH", CustomerID: "c-1"})
	require.NoError(t, err)
	_, err = svc.Audit(ctx, "FLASH", PageRequest{})
	require.NoError(t, err)
	require.Zero(t, st.counts.Load(), "a page read the voucher's live counts")
}
