package voucher

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// flakyStore serves one voucher definition, after delay, or fails with
// Unavailable while down is set.
type flakyStore struct {
	Store
	v     Voucher
	delay time.Duration
	down  atomic.Bool
	reads atomic.Int64
}

func (s *flakyStore) Voucher(context.Context, string) (Voucher, error) {
	s.reads.Add(1)
	time.Sleep(s.delay)
	if s.down.Load() {
		return Voucher{}, Unavailable(nil, "the database is unavailable")
	}
	return s.v, nil
}

func (s *flakyStore) VoucherDefinition(ctx context.Context, code string) (Voucher, error) {
	return s.Voucher(ctx, code)
}

// nopEvents stands in for the Kafka log; the cache never calls it.
type nopEvents struct{ EventLog }

func newCacheService(t *testing.T, st Store, writes FlashWrites, clock func() time.Time) *Service {
	t.Helper()
	svc, err := NewService(ServiceConfig{Store: st, Gate: soldOutGate{}, Events: nopEvents{}, FlashWrites: writes,
		VoucherCacheTTL: time.Second, StaleVoucherMax: time.Minute, Clock: clock})
	require.NoError(t, err)
	return svc
}

// While the store cannot be read, Kafka mode keeps using a flash voucher's
// last definition, for at most StaleVoucherMax, trying the store once per
// VoucherCacheTTL; sync mode does not.
func TestCachedVoucherThroughStoreOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	advance := func(d time.Duration) { now.Add(int64(d)) }

	for _, writes := range []FlashWrites{FlashKafka, FlashSync} {
		st := &flakyStore{v: flashVoucher()}
		svc := newCacheService(t, st, writes, clock)
		_, err := svc.catalog.voucher(ctx, "SALE")
		require.NoError(t, err)

		st.down.Store(true)
		advance(2 * time.Second)
		reads := st.reads.Load()
		v, err := svc.catalog.voucher(ctx, "SALE")
		if writes == FlashSync {
			require.True(t, IsCode(err, CodeUnavailable), "sync mode served a definition it could not read: %v", err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, st.v, v)
		for range 10 {
			_, err = svc.catalog.voucher(ctx, "SALE")
			require.NoError(t, err)
		}
		require.Equal(t, reads+1, st.reads.Load(), "the store was retried more than once per VoucherCacheTTL")

		advance(time.Minute)
		_, err = svc.catalog.voucher(ctx, "SALE")
		require.True(t, IsCode(err, CodeUnavailable), "a definition older than StaleVoucherMax was served: %v", err)

		st.down.Store(false)
		_, err = svc.catalog.voucher(ctx, "SALE")
		require.NoError(t, err)
	}

	// A standard voucher is never served stale.
	st := &flakyStore{v: flashVoucher()}
	st.v.FlashSale = false
	svc := newCacheService(t, st, FlashKafka, clock)
	_, err := svc.catalog.voucher(ctx, "SALE")
	require.NoError(t, err)
	st.down.Store(true)
	advance(2 * time.Second)
	_, err = svc.catalog.voucher(ctx, "SALE")
	require.True(t, IsCode(err, CodeUnavailable), "a standard voucher was served stale: %v", err)
}

// Many requests finding the definition expired at once cause one store
// read; the others use the expired definition meanwhile.
func TestCachedVoucherOneRefreshAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	st := &flakyStore{v: flashVoucher(), delay: 50 * time.Millisecond}
	svc := newCacheService(t, st, FlashSync, clock)
	_, err := svc.catalog.voucher(ctx, "SALE")
	require.NoError(t, err)

	now.Add(int64(1500 * time.Millisecond))
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := svc.catalog.voucher(ctx, "SALE")
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	require.EqualValues(t, 2, st.reads.Load())
}

// A definition older than twice the TTL is not served while it is re-read:
// the requests that find it so wait for the one read instead of each
// reading it (a burst after a quiet spell).
func TestCachedVoucherStaleBurstReadsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	st := &flakyStore{v: flashVoucher(), delay: 50 * time.Millisecond}
	svc := newCacheService(t, st, FlashSync, clock)
	_, err := svc.catalog.voucher(ctx, "SALE")
	require.NoError(t, err)

	now.Add(int64(3 * time.Second))
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := svc.catalog.voucher(ctx, "SALE")
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	require.EqualValues(t, 2, st.reads.Load())
}

func (s *flakyStore) ResolveCode(ctx context.Context, code, orderID string) (Resolution, error) {
	return resolveByReads(ctx, s, nil, code, orderID)
}

// StackOf: this fake holds no stacks.
func (*flakyStore) StackOf(context.Context, string) (string, bool, error) { return "", false, nil }
