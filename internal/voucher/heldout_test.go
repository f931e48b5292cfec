package voucher

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// soldOutGate answers every reservation GateSoldOut, as the sold-out cache
// does during a flash sale.
type soldOutGate struct{ Gate }

func (soldOutGate) Reserve(context.Context, string, int32, Hold) (GateDecision, error) {
	return GateDecision{Outcome: GateSoldOut}, nil
}

// heldStore serves one flash voucher whose uses are all held; sum is what
// Holds answers, after delay.
type heldStore struct {
	Store
	v     Voucher
	delay time.Duration
	mu    sync.Mutex
	sum   HoldSummary
	down  bool // Holds answers Unavailable
	reads atomic.Int64
}

func (s *heldStore) Voucher(context.Context, string) (Voucher, error) { return s.v, nil }

func (s *heldStore) VoucherDefinition(ctx context.Context, code string) (Voucher, error) {
	return s.Voucher(ctx, code)
}

func (s *heldStore) Holds(context.Context, string) (HoldSummary, error) {
	s.reads.Add(1)
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return HoldSummary{}, Unavailable(nil, "the database is unavailable")
	}
	return s.sum, nil
}

func (s *heldStore) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

func (s *heldStore) set(sum HoldSummary) {
	s.mu.Lock()
	s.sum = sum
	s.mu.Unlock()
}

func flashVoucher() Voucher {
	now := time.Now()
	return Voucher{Code: "SALE", DiscountAmount: 1, TotalLimit: 10, PerUserLimit: 1,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour), FlashSale: true}
}

// The flash paths read the holds of a sold-out voucher once per TTL and
// instance, however many requests are refused meanwhile, and answer
// HELD_OUT or OUT_OF_STOCK from that read.
func TestHeldOutFromCachedHolds(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	st := &heldStore{v: flashVoucher(), delay: 20 * time.Millisecond}
	st.set(HoldSummary{TotalLimit: 10, UsedCount: 10, EarliestExpiry: now.Add(90 * time.Second)})
	svc, err := NewService(ServiceConfig{Store: st, Gate: soldOutGate{},
		Clock: func() time.Time { return time.Unix(0, clock.Load()) }})
	require.NoError(t, err)
	ctx := context.Background()
	req := ReserveRequest{Code: "SALE", CustomerID: "1", OrderID: "o-1", OrderAmount: 1}

	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := svc.Reserve(ctx, req)
			var ve *Error
			if !errors.As(err, &ve) || ve.Code != CodeHeldOut || ve.RetryAfter != 90*time.Second {
				t.Errorf("got %v", err)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, st.reads.Load(), "concurrent misses share one read")

	// Every hold confirmed: the answer changes once the read is a TTL old.
	st.set(HoldSummary{TotalLimit: 10, UsedCount: 10})
	clock.Add(int64(500 * time.Millisecond))
	_, err = svc.Reserve(ctx, req)
	require.True(t, IsCode(err, CodeHeldOut), "%v", err)
	clock.Add(int64(600 * time.Millisecond))
	_, err = svc.Reserve(ctx, req)
	require.True(t, IsCode(err, CodeOutOfStock), "%v", err)
	require.EqualValues(t, 2, st.reads.Load())
}

// A sold-out flash voucher is answered the same in both write modes while
// its holds cannot be read: from the read made a moment before the store
// went away (nothing in the store changes meanwhile), else HELD_OUT with
// the reservation TTL, since no hold is known to be CONFIRMED.
func TestSoldOutAnswerWhileHoldsCannotBeRead(t *testing.T) {
	t.Parallel()
	now := time.Now()
	held := HoldSummary{TotalLimit: 10, UsedCount: 10, EarliestExpiry: now.Add(90 * time.Second)}
	paid := HoldSummary{TotalLimit: 10, UsedCount: 10}
	for _, tc := range []struct {
		name string
		// before is what a read a moment before the store went away found
		// (nil: no read).
		before    *HoldSummary
		wantCode  ErrorCode
		wantRetry time.Duration
	}{
		{"no read: every use may be RESERVED", nil, CodeHeldOut, DefaultReservationTTL},
		{"read before: RESERVED holds", &held, CodeHeldOut, 90 * time.Second},
		{"read before: every hold CONFIRMED", &paid, CodeOutOfStock, 0},
	} {
		for _, writes := range []FlashWrites{FlashSync, FlashKafka} {
			t.Run(tc.name+"/"+string(writes), func(t *testing.T) {
				t.Parallel()
				var clock atomic.Int64
				clock.Store(now.UnixNano())
				st := &heldStore{v: flashVoucher()}
				svc, err := NewService(ServiceConfig{Store: st, Gate: soldOutGate{}, Events: nopEvents{}, FlashWrites: writes,
					Clock: func() time.Time { return time.Unix(0, clock.Load()) }})
				require.NoError(t, err)
				ctx := context.Background()
				req := ReserveRequest{Code: "SALE", CustomerID: "1", OrderID: "o-1", OrderAmount: 1}
				if tc.before != nil {
					st.set(*tc.before)
					_, err := svc.Reserve(ctx, req)
					require.Equal(t, tc.wantCode, CodeOf(err), "%v", err)
					clock.Add(int64(1100 * time.Millisecond))
				}
				st.setDown(true)
				_, err = svc.Reserve(ctx, req)
				var ve *Error
				require.ErrorAs(t, err, &ve)
				require.Equal(t, tc.wantCode, ve.Code, "%v", err)
				if tc.before != nil && tc.wantCode == CodeHeldOut {
					// Counted from the read, which is a second older now.
					require.InDelta(t, tc.wantRetry-time.Second, ve.RetryAfter, float64(time.Second), "%v", err)
				} else {
					require.Equal(t, tc.wantRetry, ve.RetryAfter, "%v", err)
				}
			})
		}
	}
}

// BenchmarkReserveSoldOutFlash is the service's share of a rejected flash
// reservation: the answer HELD_OUT from the cached holds.
func BenchmarkReserveSoldOutFlash(b *testing.B) {
	st := &heldStore{v: flashVoucher()}
	st.set(HoldSummary{TotalLimit: 10, UsedCount: 10, EarliestExpiry: time.Now().Add(time.Hour)})
	svc, err := NewService(ServiceConfig{Store: st, Gate: soldOutGate{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := ReserveRequest{Code: "SALE", CustomerID: "1", OrderID: "o-1", OrderAmount: 1}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := svc.Reserve(ctx, req); !IsCode(err, CodeHeldOut) {
				b.Fatal(err)
			}
		}
	})
}

func (s *heldStore) ResolveCode(ctx context.Context, code, orderID string) (Resolution, error) {
	return resolveByReads(ctx, s, nil, code, orderID)
}

// StackOf: this fake holds no stacks.
func (*heldStore) StackOf(context.Context, string) (string, bool, error) { return "", false, nil }

// budgetRefusingGate refuses every reservation for the budget with dec's
// counts, as reserve.lua does once the money is held.
type budgetRefusingGate struct {
	Gate
	dec GateDecision
}

func (g budgetRefusingGate) Reserve(context.Context, string, int32, Hold) (GateDecision, error) {
	return g.dec, nil
}

// A flash BUDGET_EXCEEDED carries a Retry-After while a RESERVED hold may
// free some money: one the store knows, or one only the gate holds yet
// (Kafka mode before the consumer writes it, or a write in flight: fresh,
// about a TTL from expiring); none when every held use is CONFIRMED.
func TestBudgetExceededRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Now()
	refused := GateDecision{Outcome: GateBudgetExceeded, BudgetLeft: 1000, Remaining: 7}
	local := GateDecision{Outcome: GateBudgetExceeded, Local: true}
	for _, tc := range []struct {
		name      string
		dec       GateDecision
		sum       HoldSummary
		wantRetry time.Duration
	}{
		{"store knows a RESERVED hold", refused, HoldSummary{TotalLimit: 10, UsedCount: 3, EarliestExpiry: now.Add(90 * time.Second)}, 90 * time.Second},
		{"the gate holds uses the store does not record yet", refused, HoldSummary{TotalLimit: 10}, DefaultReservationTTL},
		{"every held use CONFIRMED", refused, HoldSummary{TotalLimit: 10, UsedCount: 3}, 0},
		{"a local refusal counts no held uses", local, HoldSummary{TotalLimit: 10, UsedCount: 3}, 0},
	} {
		for _, writes := range []FlashWrites{FlashSync, FlashKafka} {
			t.Run(tc.name+"/"+string(writes), func(t *testing.T) {
				t.Parallel()
				st := &heldStore{v: flashVoucher()}
				st.v.Budget = Budget{Amount: 10_000}
				st.set(tc.sum)
				svc, err := NewService(ServiceConfig{Store: st, Gate: budgetRefusingGate{dec: tc.dec}, Events: nopEvents{},
					FlashWrites: writes, Clock: func() time.Time { return now }})
				require.NoError(t, err)
				_, err = svc.Reserve(context.Background(), ReserveRequest{Code: "SALE", CustomerID: "1", OrderID: "o-1", OrderAmount: 1})
				var ve *Error
				require.ErrorAs(t, err, &ve)
				require.Equal(t, CodeBudgetExceeded, ve.Code, "%v", err)
				require.Equal(t, tc.wantRetry, ve.RetryAfter, "%v", err)
			})
		}
	}
}
