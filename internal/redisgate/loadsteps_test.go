package redisgate

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// stepSnapshot is a campaign budget's snapshot of n orders: held, confirmed
// and released ones, with codes and customers.
func stepSnapshot(code string, n int) voucher.Snapshot {
	v := testVoucher(code, int32(2*n), 5)
	at := time.Now().UTC().Truncate(time.Millisecond)
	snap := voucher.Snapshot{Voucher: v, Customers: map[string]int32{}}
	for i := range n {
		st := []voucher.Status{voucher.StatusReserved, voucher.StatusConfirmed, voucher.StatusReleased}[i%3]
		cust := strconv.Itoa(i % 7)
		snap.Orders = append(snap.Orders, voucher.Redemption{OrderID: orderID(i), VoucherCode: "CODE-" + strconv.Itoa(i),
			CustomerID: cust, OrderAmount: 500, DiscountAmount: 100, Status: st, CreatedAt: at, UpdatedAt: at,
			ExpiresAt: at.Add(time.Minute)})
		if st != voucher.StatusReleased {
			snap.Customers[cust]++
			snap.Held++
		}
	}
	return snap
}

// TestLoadInStepsMatchesOneScript: a snapshot written in steps gives the
// state the one-script load gives, with no staging key left.
func TestLoadInStepsMatchesOneScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snap := stepSnapshot("cmp_STEPLOAD0001", 100)
	one := newGate(t, Config{})
	steps := newGate(t, Config{ScanCount: 3})
	var states []voucher.GateState
	for _, g := range []*Gate{one, steps} {
		wrote, err := g.Load(ctx, snap)
		require.NoError(t, err)
		require.True(t, wrote)
		wrote, err = g.Load(ctx, snap)
		require.NoError(t, err)
		require.False(t, wrote, "loaded once")
		st, err := g.Inspect(ctx, snap.Voucher.Code)
		require.NoError(t, err)
		states = append(states, st)
		k := keysFor(g.cfg.KeyPrefix, snap.Voucher.Code)
		for _, key := range []string{k.remaining, k.users, k.orders, k.codes, k.held, k.version} {
			require.Positive(t, rawTTL(t, g, key), "%s expires with the voucher", key)
		}
		for _, key := range k.staging() {
			require.EqualValues(t, -2, rawTTL(t, g, key), "%s is gone", key)
		}
	}
	require.Equal(t, states[0], states[1])
	require.True(t, states[1].HeldCounted)
	require.EqualValues(t, snap.Held, states[1].HeldCount)
	require.Len(t, states[1].Codes, int(snap.Held))
}

// halfLoaded counts the entries of a voucher's hashes while it is not
// loaded, leaving out the leftover order of TestLoadInStepsIsNotSeenHalfDone.
var halfLoaded = rueidis.NewLuaScriptReadOnly(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
return redis.call('HLEN', KEYS[2]) - redis.call('HEXISTS', KEYS[2], 'leftover') + redis.call('HLEN', KEYS[3]) + redis.call('HLEN', KEYS[4])`)

// TestLoadInStepsIsNotSeenHalfDone: while a snapshot is written in steps,
// the voucher is not loaded and none of its hashes' entries are there; a
// second
// loader waits its turn (an error), and a leftover of an earlier load is
// not mixed in.
func TestLoadInStepsIsNotSeenHalfDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{ScanCount: 2, SoldOutTTL: -1})
	snap := stepSnapshot("cmp_STEPLOAD0002", 600)
	k := keysFor(g.cfg.KeyPrefix, snap.Voucher.Code)
	c := rawClient(t, g)
	// A leftover order of an earlier load, and another loader's turn.
	require.NoError(t, c.Do(ctx, c.B().Hset().Key(k.orders).FieldValue().FieldValue("leftover", "H|1|1|1|1|1").Build()).Error())
	require.NoError(t, c.Do(ctx, c.B().Set().Key(k.loading).Value("other").Build()).Error())
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := g.Load(short, snap)
	cancel()
	require.Error(t, err, "another loader is writing: Load waits for its turn")
	require.NoError(t, c.Do(ctx, c.B().Del().Key(k.loading).Build()).Error())

	var wg sync.WaitGroup
	loaded := make(chan struct{})
	wg.Go(func() {
		defer close(loaded)
		wrote, err := g.Load(ctx, snap)
		assert.NoError(t, err)
		assert.True(t, wrote)
	})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-loaded:
				return
			default:
			}
			d, err := g.Reserve(ctx, snap.Voucher.Code, 5, testHoldFor(orderID(i%600), strconv.Itoa(i%600%7)))
			if !assert.NoError(t, err) {
				return
			}
			_ = d
			n, err := halfLoaded.Exec(ctx, c, []string{k.remaining, k.orders, k.users, k.codes}, nil).AsInt64()
			if !assert.NoError(t, err) || !assert.Zero(t, n, "entries of a voucher being loaded are seen") {
				return
			}
		}
	})
	wg.Wait()
	st, err := g.Inspect(ctx, snap.Voucher.Code)
	require.NoError(t, err)
	require.Len(t, st.Orders, 600)
	require.NotContains(t, st.Orders, "leftover")
	require.EqualValues(t, snap.Voucher.TotalLimit-snap.Held, st.Remaining)
	require.EqualValues(t, snap.Held, st.HeldCount)
}

// TestLoadInStepsWaitsForAnotherLoader: a loader that finds another one's
// turn waits, and reports nothing written once the other has loaded.
func TestLoadInStepsWaitsForAnotherLoader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{ScanCount: 2})
	snap := stepSnapshot("cmp_STEPLOAD0003", 10)
	k := keysFor(g.cfg.KeyPrefix, snap.Voucher.Code)
	c := rawClient(t, g)
	require.NoError(t, c.Do(ctx, c.B().Set().Key(k.loading).Value("other").Build()).Error())
	time.AfterFunc(100*time.Millisecond, func() {
		// The other loader finishes.
		_ = c.Do(ctx, c.B().Set().Key(k.remaining).Value("7").Build()).Error()
		_ = c.Do(ctx, c.B().Del().Key(k.loading).Build()).Error()
	})
	start := time.Now()
	wrote, err := g.Load(ctx, snap)
	require.NoError(t, err)
	require.False(t, wrote, "the other loader loaded it")
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	st, err := g.Inspect(ctx, snap.Voucher.Code)
	require.NoError(t, err)
	require.EqualValues(t, 7, st.Remaining)
	require.Empty(t, st.Orders, "nothing of this loader was written")
}
