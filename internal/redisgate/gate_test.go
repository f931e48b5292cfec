package redisgate

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

func TestNewConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	require.Error(t, err)
	_, err = New(Config{Addrs: []string{"127.0.0.1:1"}, KeyPrefix: "a{b}"})
	require.ErrorContains(t, err, "braces")
	_, err = New(Config{Addrs: []string{"127.0.0.1:1"}, KeyGrace: -time.Second})
	require.Error(t, err)

	g := newGate(t, Config{})
	require.Equal(t, DefaultSoldOutTTL, g.cfg.SoldOutTTL)
	require.Equal(t, DefaultKeyGrace, g.cfg.KeyGrace)
	require.Equal(t, DefaultTimeout, g.cfg.Timeout)
	require.Equal(t, DefaultSoldOutMaxOrders, g.cfg.SoldOutMaxOrders)
	_, err = New(Config{Addrs: []string{"127.0.0.1:1"}, SoldOutMaxOrders: -1})
	require.Error(t, err)
	require.NoError(t, g.Ping(context.Background()))
}

func TestKeysShareOneHashTag(t *testing.T) {
	t.Parallel()
	k := keysFor("p:", "FLASH100")
	for _, key := range k.all() {
		require.Contains(t, key, "{FLASH100}")
		require.Regexp(t, `^p:voucher:\{FLASH100\}:[a-z]+$`, key)
	}
}

// TestReserveOutcomes walks one voucher through every status of reserve.lua.
func TestReserveOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("OUTCOMES", 2, 1)

	// Not loaded: the remaining key is absent.
	d, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateNotLoaded, d.Outcome)
	require.Zero(t, rawExists(t, g, v.Code), "a not-loaded reserve writes nothing")

	loadEmpty(t, g, v)

	// Taken.
	h1 := testHold("o-1", 1)
	d, err = g.Reserve(ctx, v.Code, 1, h1)
	require.NoError(t, err)
	require.Equal(t, voucher.GateDecision{Outcome: voucher.GateTaken, Remaining: 1}, d)

	// Replay: same orderId and customer; the stored hold comes back, not the
	// new request's amounts.
	retry := h1
	retry.OrderAmount = 999
	d, err = g.Reserve(ctx, v.Code, 1, retry)
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	require.Equal(t, h1, d.Hold)
	require.EqualValues(t, 1, d.Remaining)

	// Conflict: same orderId, another customer.
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-1", 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateConflict, d.Outcome)
	require.Equal(t, "1", d.Hold.CustomerID)

	// Quota held: customer 1 holds its one use.
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-2", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateQuotaHeld, d.Outcome)

	// The last use, then sold out.
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-3", 3))
	require.NoError(t, err)
	require.Equal(t, voucher.GateDecision{Outcome: voucher.GateTaken, Remaining: 0}, d)
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-4", 4))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)

	// Released marker: a late retry of a released orderId takes nothing.
	released, err := g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	d, err = g.Reserve(ctx, v.Code, 1, h1)
	require.NoError(t, err)
	require.Equal(t, voucher.GateReleased, d.Outcome)
	require.True(t, d.Hold.Released)
	require.EqualValues(t, 1, d.Remaining)
	// Another customer on the released orderId is still a conflict.
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-1", 9))
	require.NoError(t, err)
	require.Equal(t, voucher.GateConflict, d.Outcome)

	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.True(t, st.Loaded)
	require.EqualValues(t, 1, st.Remaining)
	require.Equal(t, map[string]int32{"3": 1}, st.Users)
	require.Len(t, st.Orders, 2)
	require.EqualValues(t, 1, st.Held())
}

func TestReserveRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	_, err := g.Reserve(ctx, "bad{code}", 1, testHold("o-1", 1))
	require.True(t, voucher.IsCode(err, voucher.CodeInvalidRequest), err)
	_, err = g.Reserve(ctx, "OK", 1, testHold("bad|order", 1))
	require.True(t, voucher.IsCode(err, voucher.CodeInvalidRequest), err)
	_, err = g.Reserve(ctx, "OK", 0, testHold("o-1", 1))
	require.True(t, voucher.IsCode(err, voucher.CodeInvalidRequest), err)
	_, err = g.Release(ctx, "OK", "o-1", 0)
	require.True(t, voucher.IsCode(err, voucher.CodeInvalidRequest), err)
}

func TestReserveLargeCustomerID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("BIGCUST", 10, 1)
	loadEmpty(t, g, v)
	// Above 2^53: a Lua number would round these two to the same value.
	const a, b = int64(9007199254740993), int64(9007199254740992)
	d, err := g.Reserve(ctx, v.Code, 1, testHold("o-a", a))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-a", b))
	require.NoError(t, err)
	require.Equal(t, voucher.GateConflict, d.Outcome)
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-b", b))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.Equal(t, map[string]int32{strconv.FormatInt(a, 10): 1, strconv.FormatInt(b, 10): 1}, st.Users)
}

func TestReservePerUserLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("PERUSER3", 10, 3)
	loadEmpty(t, g, v)

	for i := range 3 {
		d, err := g.Reserve(ctx, v.Code, 3, testHold(orderID(i), 7))
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome, "use %d", i)
	}
	d, err := g.Reserve(ctx, v.Code, 3, testHold(orderID(3), 7))
	require.NoError(t, err)
	require.Equal(t, voucher.GateQuotaHeld, d.Outcome)
	require.EqualValues(t, 7, d.Remaining)

	// Giving one back frees the quota.
	released, err := g.Release(ctx, v.Code, orderID(0), voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	d, err = g.Reserve(ctx, v.Code, 3, testHold(orderID(3), 7))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)

	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.Equal(t, map[string]int32{"7": 3}, st.Users)
	require.EqualValues(t, 7, st.Remaining)
}

func TestReleaseTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("RELTWICE", 5, 1)
	loadEmpty(t, g, v)
	h := testHold("o-1", 1)
	_, err := g.Reserve(ctx, v.Code, 1, h)
	require.NoError(t, err)

	released, err := g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	released, err = g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark)
	require.NoError(t, err)
	require.False(t, released, "a second release gives nothing back")
	released, err = g.Release(ctx, v.Code, "o-1", voucher.ReleaseForget)
	require.NoError(t, err)
	require.False(t, released, "forget does not resurrect a released orderId")
	released, err = g.Release(ctx, v.Code, "unknown", voucher.ReleaseMark)
	require.NoError(t, err)
	require.False(t, released)

	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 5, st.Remaining)
	require.Empty(t, st.Users, "a customer at 0 is deleted from the hash")
	want := h
	want.Released = true
	require.Equal(t, map[string]voucher.Hold{"o-1": want}, st.Orders)

	got, found, err := g.Lookup(ctx, v.Code, "o-1")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, want, got)
}

func TestReleaseForgetLetsOrderIDBeReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("FORGET", 1, 1)
	loadEmpty(t, g, v)
	h := testHold("o-1", 1)
	d, err := g.Reserve(ctx, v.Code, 1, h)
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)

	released, err := g.Release(ctx, v.Code, "o-1", voucher.ReleaseForget)
	require.NoError(t, err)
	require.True(t, released)
	_, found, err := g.Lookup(ctx, v.Code, "o-1")
	require.NoError(t, err)
	require.False(t, found)

	// The same orderId (even for another customer) takes the use again.
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-1", 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateDecision{Outcome: voucher.GateTaken, Remaining: 0}, d)
}

func TestReleaseNotLoadedChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	for _, mode := range []voucher.ReleaseMode{voucher.ReleaseMark, voucher.ReleaseForget} {
		released, err := g.Release(ctx, "NOTLOADED", "o-1", mode)
		require.NoError(t, err)
		require.False(t, released)
	}
	require.Zero(t, rawExists(t, g, "NOTLOADED"))
}

// TestConcurrentCommitsCombined: concurrent commits of one voucher share
// script calls, and each caller still gets its own hold's answer: pending
// holds are committed once, released and unknown orderIds are not, and the
// holds of another voucher are untouched.
func TestConcurrentCommitsCombined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v, other := testVoucher("COMBINED", 200, 1), testVoucher("OTHERCOMMIT", 10, 1)
	loadEmpty(t, g, v)
	loadEmpty(t, g, other)
	const n = 150
	holds := make([]voucher.Hold, n)
	for i := range holds {
		holds[i] = testHold(orderID(i), int64(i+1))
		holds[i].Pending = true
		d, err := g.Reserve(ctx, v.Code, 1, holds[i])
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
	}
	otherHold := testHold(orderID(0), 1)
	otherHold.Pending = true
	_, err := g.Reserve(ctx, other.Code, 1, otherHold)
	require.NoError(t, err)
	// Every tenth order is released before its commit: it must stay released.
	for i := 0; i < n; i += 10 {
		released, err := g.Release(ctx, v.Code, holds[i].OrderID, voucher.ReleaseMark)
		require.NoError(t, err)
		require.True(t, released)
	}

	type answer struct {
		committed bool
		err       error
	}
	answers := make([]answer, 2*n+1)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			h := holds[i%n]
			if i == 2*n {
				h = testHold("unknown-order", 999)
			}
			ok, err := g.Commit(ctx, v.Code, h)
			answers[i] = answer{ok, err}
		})
	}
	wg.Wait()
	for i := range n {
		a, b := answers[i], answers[i+n]
		require.NoError(t, a.err)
		require.NoError(t, b.err)
		if i%10 == 0 {
			require.False(t, a.committed || b.committed, "released order %d committed", i)
		} else {
			require.True(t, a.committed != b.committed, "order %d committed exactly once", i)
		}
		got, found, err := g.Lookup(ctx, v.Code, holds[i].OrderID)
		require.NoError(t, err)
		require.True(t, found)
		require.False(t, got.Pending)
		require.Equal(t, i%10 == 0, got.Released)
	}
	require.NoError(t, answers[2*n].err)
	require.False(t, answers[2*n].committed, "an unknown orderId is not committed")
	got, _, err := g.Lookup(ctx, other.Code, otherHold.OrderID)
	require.NoError(t, err)
	require.True(t, got.Pending, "another voucher's hold is untouched")
}

func TestPendingAndCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("PENDING", 5, 1)
	loadEmpty(t, g, v)

	h := testHold("o-1", 1)
	h.Pending = true
	d, err := g.Reserve(ctx, v.Code, 1, h)
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)

	// A replay before the ack says pending.
	d, err = g.Reserve(ctx, v.Code, 1, h)
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	require.True(t, d.Hold.Pending)
	got, found, err := g.Lookup(ctx, v.Code, "o-1")
	require.NoError(t, err)
	require.True(t, found)
	require.True(t, got.Pending)

	ok, err := g.Commit(ctx, v.Code, h)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = g.Commit(ctx, v.Code, h)
	require.NoError(t, err, "commit is idempotent")
	require.False(t, ok, "already durable")
	d, err = g.Reserve(ctx, v.Code, 1, h)
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	require.False(t, d.Hold.Pending)
	want := h
	want.Pending = false
	require.Equal(t, want, d.Hold)

	// Commit does not revive a released hold; unknown orderIds are a no-op.
	released, err := g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	ok, err = g.Commit(ctx, v.Code, h)
	require.NoError(t, err)
	require.False(t, ok, "a released hold is not committed")
	ok, err = g.Commit(ctx, v.Code, testHold("unknown", 1))
	require.NoError(t, err)
	require.False(t, ok)
	got, _, err = g.Lookup(ctx, v.Code, "o-1")
	require.NoError(t, err)
	require.True(t, got.Released)

	// A pending hold can be released too (compensation after a failed
	// produce): forget mode leaves no trace.
	h2 := testHold("o-2", 2)
	h2.Pending = true
	_, err = g.Reserve(ctx, v.Code, 1, h2)
	require.NoError(t, err)
	released, err = g.Release(ctx, v.Code, "o-2", voucher.ReleaseForget)
	require.NoError(t, err)
	require.True(t, released)
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 5, st.Remaining)
	require.Empty(t, st.Users)
	require.Len(t, st.Orders, 1)
}

func TestLoadOnlyWhenAbsent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("LOADONCE", 10, 2)
	v.UsedCount = 3
	now := time.Now().UTC().Truncate(time.Millisecond)
	red := func(id string, cust string, status voucher.Status) voucher.Redemption {
		return voucher.Redemption{
			OrderID: id, VoucherCode: v.Code, CustomerID: cust, OrderAmount: 500, DiscountAmount: v.DiscountAmount,
			Status: status, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(15 * time.Minute),
		}
	}
	snap := voucher.Snapshot{
		Voucher:   v,
		Held:      3,
		Customers: map[string]int32{"1": 2, "2": 1, "3": 0},
		Orders: []voucher.Redemption{
			red("a", "1", voucher.StatusReserved), red("b", "1", voucher.StatusConfirmed),
			red("c", "2", voucher.StatusReserved), red("d", "3", voucher.StatusReleased),
		},
	}

	loaded, err := g.Loaded(ctx, v.Code)
	require.NoError(t, err)
	require.False(t, loaded)
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.Equal(t, voucher.GateState{}, st)

	wrote, err := g.Load(ctx, snap)
	require.NoError(t, err)
	require.True(t, wrote)
	loaded, err = g.Loaded(ctx, v.Code)
	require.NoError(t, err)
	require.True(t, loaded)

	st, err = g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 7, st.Remaining, "remaining is totalLimit - held")
	require.Equal(t, map[string]int32{"1": 2, "2": 1}, st.Users)
	require.Len(t, st.Orders, 4)
	require.True(t, st.Orders["d"].Released)
	require.False(t, st.Orders["a"].Released)
	require.Equal(t, now, st.Orders["a"].ReservedAt)
	require.EqualValues(t, 3, st.Held())

	// A second load (another snapshot) changes nothing.
	snap2 := voucher.Snapshot{Voucher: testVoucher("LOADONCE", 1000, 1)}
	wrote, err = g.Load(ctx, snap2)
	require.NoError(t, err)
	require.False(t, wrote)
	st2, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.Equal(t, st, st2)

	// Loaded orders answer as Redis-made ones do.
	d, err := g.Reserve(ctx, v.Code, 2, voucher.Hold{OrderID: "b", CustomerID: "1"})
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	d, err = g.Reserve(ctx, v.Code, 2, voucher.Hold{OrderID: "d", CustomerID: "3"})
	require.NoError(t, err)
	require.Equal(t, voucher.GateReleased, d.Outcome)
	d, err = g.Reserve(ctx, v.Code, 2, testHold("e", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateQuotaHeld, d.Outcome)

	// Every key expires at endsAt + KeyGrace.
	want := time.Until(v.EndsAt.Add(DefaultKeyGrace))
	k := keysFor(g.cfg.KeyPrefix, v.Code)
	for _, key := range []string{k.remaining, k.users, k.orders} {
		ttl := rawTTL(t, g, key)
		require.InDelta(t, want.Seconds(), ttl.Seconds(), 60, key)
	}
}

func TestLoadBigSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("BIGLOAD", 20000, 1)
	snap := voucher.Snapshot{Voucher: v, Customers: map[string]int32{}}
	for i := range 5001 { // more than one HSET chunk, odd on purpose
		cust := strconv.Itoa(i + 1)
		snap.Orders = append(snap.Orders, voucher.Redemption{OrderID: orderID(i), CustomerID: cust, Status: voucher.StatusReserved})
		snap.Customers[cust] = 1
		snap.Held++
	}
	wrote, err := g.Load(ctx, snap)
	require.NoError(t, err)
	require.True(t, wrote)
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 20000-5001, st.Remaining)
	require.Len(t, st.Users, 5001)
	require.Len(t, st.Orders, 5001)
}

func TestLoadKeepsKeysAMinuteAtLeast(t *testing.T) {
	t.Parallel()
	g := newGate(t, Config{KeyGrace: time.Millisecond})
	v := testVoucher("ENDED", 5, 1)
	v.EndsAt = time.Now().Add(-time.Hour)
	loadEmpty(t, g, v)
	ttl := rawTTL(t, g, keysFor(g.cfg.KeyPrefix, v.Code).remaining)
	require.Greater(t, ttl, 50*time.Second)
	require.LessOrEqual(t, ttl, minKeyTTL)
}

func TestReserveGivesNewHashesTheVoucherExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("NEWHASH", 5, 1)
	loadEmpty(t, g, v)
	k := keysFor(g.cfg.KeyPrefix, v.Code)
	require.Equal(t, time.Duration(-2), rawTTL(t, g, k.users), "an empty snapshot writes no hash")

	_, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	want := rawTTL(t, g, k.remaining)
	require.Greater(t, want, 23*time.Hour)
	for _, key := range []string{k.users, k.orders} {
		require.InDelta(t, want.Seconds(), rawTTL(t, g, key).Seconds(), 5, key)
	}

	// The last order given back and forgotten takes both hashes with it;
	// the next take creates them again, with the expiry. A take into
	// hashes that exist leaves their expiry alone.
	_, err = g.Release(ctx, v.Code, "o-1", voucher.ReleaseForget)
	require.NoError(t, err)
	require.Equal(t, time.Duration(-2), rawTTL(t, g, k.users))
	require.Equal(t, time.Duration(-2), rawTTL(t, g, k.orders))
	for i, id := range []string{"o-2", "o-3"} {
		_, err = g.Reserve(ctx, v.Code, 1, testHold(id, int64(i+2)))
		require.NoError(t, err)
		for _, key := range []string{k.users, k.orders} {
			require.InDelta(t, want.Seconds(), rawTTL(t, g, key).Seconds(), 5, key)
		}
	}
}

func TestAdjustLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	g := newGate(t, Config{Clock: clock.Now, SoldOutTTL: time.Hour})
	v := testVoucher("ADJUST", 1, 1)

	// Not loaded: nothing is written.
	require.NoError(t, g.AdjustLimit(ctx, v, 5))
	require.Zero(t, rawExists(t, g, v.Code))

	loadEmpty(t, g, v)
	_, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	d, err := g.Reserve(ctx, v.Code, 1, testHold("o-2", 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)

	// Raising the limit (and the end) clears the sold-out cache at once,
	// long before its TTL, and moves the expiry.
	v.TotalLimit = 3
	v.EndsAt = v.EndsAt.Add(48 * time.Hour)
	require.NoError(t, g.AdjustLimit(ctx, v, 2))
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-2", 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateDecision{Outcome: voucher.GateTaken, Remaining: 1}, d)
	ttl := rawTTL(t, g, keysFor(g.cfg.KeyPrefix, v.Code).orders)
	require.InDelta(t, time.Until(v.EndsAt.Add(DefaultKeyGrace)).Seconds(), ttl.Seconds(), 60)

	// Lowering.
	require.NoError(t, g.AdjustLimit(ctx, v, -1))
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 0, st.Remaining)
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-3", 3))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)
}

// TestAdoptReleasedAndKnown: Known tells unknown, holding and released
// orderIds apart, and AdoptReleased takes a use back for a confirmed row
// only over a released marker, once; Adopt leaves a released marker alone.
func TestAdoptReleasedAndKnown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("READOPT", 3, 2)
	loadEmpty(t, g, v)
	for _, id := range []string{"kept", "replaced"} {
		d, err := g.Reserve(ctx, v.Code, v.PerUserLimit, testHold(id, 7))
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
	}
	_, err := g.Release(ctx, v.Code, "replaced", voucher.ReleaseMark)
	require.NoError(t, err)

	known, err := g.Known(ctx, v.Code, []string{"kept", "replaced", "never"})
	require.NoError(t, err)
	require.Equal(t, []voucher.GateOrderState{voucher.GateOrderHolding, voucher.GateOrderReleased, voucher.GateOrderUnknown}, known)

	confirmed := testHold("replaced", 7)
	confirmed.Confirmed = true
	for _, tc := range []struct {
		name  string
		adopt func() (bool, error)
		want  bool
	}{
		{"adopt over a released marker", func() (bool, error) { return g.Adopt(ctx, v.Code, confirmed) }, false},
		{"adopt released: held order", func() (bool, error) { return g.AdoptReleased(ctx, v.Code, testHold("kept", 7)) }, false},
		{"adopt released: unknown order", func() (bool, error) { return g.AdoptReleased(ctx, v.Code, testHold("never", 7)) }, false},
		{"adopt released", func() (bool, error) { return g.AdoptReleased(ctx, v.Code, confirmed) }, true},
		{"adopt released again", func() (bool, error) { return g.AdoptReleased(ctx, v.Code, confirmed) }, false},
	} {
		adopted, err := tc.adopt()
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, adopted, tc.name)
	}
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Remaining, "the confirmed order holds its use again")
	require.EqualValues(t, 2, st.Users["7"])
	require.Equal(t, confirmed, st.Orders["replaced"])
	known, err = g.Known(ctx, v.Code, []string{"replaced"})
	require.NoError(t, err)
	require.Equal(t, []voucher.GateOrderState{voucher.GateOrderHolding}, known)
}

func TestAdoptAndClamp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1}) // replays at zero go to Redis
	v := testVoucher("RECONCILE", 3, 1)

	// Not loaded: both leave Redis alone.
	adopted, err := g.Adopt(ctx, v.Code, testHold("db-1", 1))
	require.NoError(t, err)
	require.False(t, adopted)
	before, after, err := g.Clamp(ctx, v.Code, v.TotalLimit)
	require.NoError(t, err)
	require.Zero(t, before)
	require.Zero(t, after)
	require.Zero(t, rawExists(t, g, v.Code))

	loadEmpty(t, g, v)
	for i := range 3 {
		d, err := g.Reserve(ctx, v.Code, 1, testHold(orderID(i), int64(10+i)))
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
	}

	// A hold the database has and Redis lost is adopted even at zero
	// remaining; adopting again, or adopting a known orderId, does nothing.
	h := testHold("db-1", 1)
	adopted, err = g.Adopt(ctx, v.Code, h)
	require.NoError(t, err)
	require.True(t, adopted)
	adopted, err = g.Adopt(ctx, v.Code, h)
	require.NoError(t, err)
	require.False(t, adopted)
	adopted, err = g.Adopt(ctx, v.Code, testHold(orderID(0), 10))
	require.NoError(t, err)
	require.False(t, adopted)

	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, -1, st.Remaining)
	require.Equal(t, h, st.Orders["db-1"])
	require.EqualValues(t, 1, st.Users["1"])
	d, err := g.Reserve(ctx, v.Code, 1, h)
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	require.Zero(t, d.Remaining, "a negative counter reads as none left")
	d, err = g.Reserve(ctx, v.Code, 1, testHold("late", 99))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)

	// Clamp never raises: 4 holds on a limit of 3 keeps -1.
	before, after, err = g.Clamp(ctx, v.Code, 3)
	require.NoError(t, err)
	require.EqualValues(t, -1, before)
	require.EqualValues(t, -1, after)

	// A counter above totalLimit - holds (say, an INCR that lost its
	// release) is lowered, and keeps its expiry.
	k := keysFor(g.cfg.KeyPrefix, v.Code)
	c := rawClient(t, g)
	require.NoError(t, c.Do(ctx, c.B().Incrby().Key(k.remaining).Increment(10).Build()).Error())
	released, err := g.Release(ctx, v.Code, orderID(0), voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	before, after, err = g.Clamp(ctx, v.Code, 5) // limit 5, 3 holds left
	require.NoError(t, err)
	require.EqualValues(t, 10, before)
	require.EqualValues(t, 2, after)
	require.Greater(t, rawTTL(t, g, k.remaining), time.Hour)
}

func TestLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})

	unlock, ok, err := g.Lock(ctx, "LOCKED", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok2, err := g.Lock(ctx, "LOCKED", time.Minute)
	require.NoError(t, err)
	require.False(t, ok2, "a second loader waits")
	_, okOther, err := g.Lock(ctx, "OTHER", time.Minute)
	require.NoError(t, err)
	require.True(t, okOther, "locks are per voucher")

	unlock()
	unlock() // idempotent
	unlock2, ok, err := g.Lock(ctx, "LOCKED", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	unlock2()

	// A loader whose lock expired must not free the next loader's lock.
	stale, ok, err := g.Lock(ctx, "EXPIRING", 50*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		_, ok, err := g.Lock(ctx, "EXPIRING", time.Minute)
		require.NoError(t, err)
		return ok
	}, 5*time.Second, 20*time.Millisecond)
	stale()
	_, ok, err = g.Lock(ctx, "EXPIRING", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "the stale unlock left the new holder's lock alone")
}

func TestLockConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	var winners atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, ok, err := g.Lock(ctx, "RACE", time.Minute)
			if err == nil && ok {
				winners.Add(1)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, winners.Load())
}

func TestForget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("FORGETME", 3, 1)
	loadEmpty(t, g, v)
	_, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	_, _, err = g.Lock(ctx, v.Code, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 4, rawExists(t, g, v.Code))

	require.NoError(t, g.Forget(ctx, v.Code))
	require.Zero(t, rawExists(t, g, v.Code))
	d, err := g.Reserve(ctx, v.Code, 1, testHold("o-2", 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateNotLoaded, d.Outcome)
}

// waitSoldOutCached waits until the sold-out cache holds its copy of code.
func waitSoldOutCached(tb testing.TB, g *Gate, code string) {
	tb.Helper()
	require.Eventually(tb, func() bool { return g.soldOut.get(code) != nil },
		5*time.Second, 5*time.Millisecond, "the copy of %s's orders never arrived", code)
}

// TestSoldOutCacheAnswersWithoutRedis proves the cache: with Redis stopped,
// a sold-out code is still answered within the TTL, known orderIds as Redis
// answered them, and only after it do callers see that Redis is gone.
func TestSoldOutCacheAnswersWithoutRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewRedis(t)
	clock := newFakeClock()
	var hooked atomic.Int32
	g := newGate(t, Config{Clock: clock.Now, SoldOutTTL: time.Second, Timeout: 300 * time.Millisecond,
		OnSoldOutHit: func(code string) { hooked.Add(1) }}, srv.Addr)
	v := testVoucher("CACHED", 3, 1)
	loadEmpty(t, g, v)

	// What Redis answers for a winner's retry, a released orderId and a
	// foreign customer, before the voucher sells out.
	h1, h2, h4 := testHold("o-1", 1), testHold("o-2", 2), testHold("o-4", 4)
	h4.Pending = true
	for _, h := range []voucher.Hold{h1, h2} {
		d, err := g.Reserve(ctx, v.Code, 1, h)
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
	}
	released, err := g.Release(ctx, v.Code, h2.OrderID, voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	redisSaid := map[string]voucher.GateDecision{}
	for name, h := range map[string]voucher.Hold{"replay": h1, "released": h2, "conflict": testHold(h1.OrderID, 9)} {
		d, err := g.Reserve(ctx, v.Code, 1, h)
		require.NoError(t, err)
		require.False(t, d.Local, name)
		d.Remaining = 0 // besides Local, the only field that differs once sold out
		redisSaid[name] = d
	}
	require.Equal(t, voucher.GateReplay, redisSaid["replay"].Outcome)
	require.Equal(t, voucher.GateReleased, redisSaid["released"].Outcome)
	require.Equal(t, voucher.GateConflict, redisSaid["conflict"].Outcome)

	// The last two uses; taking the last one starts the copy.
	for _, h := range []voucher.Hold{testHold("o-3", 3), h4} {
		d, err := g.Reserve(ctx, v.Code, 1, h)
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
	}
	waitSoldOutCached(t, g, v.Code)
	require.Zero(t, g.SoldOutHits(), "every answer so far came from Redis")

	// With Redis gone, the copy answers as Redis did, for the TTL, and
	// says it answered locally.
	srv.Stop(t)
	for name, h := range map[string]voucher.Hold{"replay": h1, "released": h2, "conflict": testHold(h1.OrderID, 9)} {
		d, err := g.Reserve(ctx, v.Code, 1, h)
		require.NoError(t, err, name)
		want := redisSaid[name]
		want.Local = true
		require.Equal(t, want, d, name)
	}
	d, err := g.Reserve(ctx, v.Code, 1, testHold("o-9", 9))
	require.NoError(t, err)
	require.Equal(t, voucher.GateDecision{Outcome: voucher.GateSoldOut, Local: true}, d)
	require.EqualValues(t, 4, g.SoldOutHits())
	require.EqualValues(t, 4, hooked.Load())

	// A pending hold asks Redis (its commit would not be seen in the copy).
	_, err = g.Reserve(ctx, v.Code, 1, h4)
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), err)
	require.Error(t, g.Ping(ctx), "Redis is really down")

	// After the TTL the call goes to Redis, which is down.
	clock.Add(time.Second)
	_, err = g.Reserve(ctx, v.Code, 1, testHold("o-5", 5))
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), err)
	_, err = g.Reserve(ctx, v.Code, 1, h1)
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), err)
	require.EqualValues(t, 4, g.SoldOutHits())
}

func TestSoldOutCacheMarksTheLastUseAndClearsOnRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	g := newGate(t, Config{Clock: clock.Now, SoldOutTTL: time.Hour})
	v := testVoucher("LASTUSE", 1, 1)
	loadEmpty(t, g, v)

	_, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	waitSoldOutCached(t, g, v.Code)
	d, err := g.Reserve(ctx, v.Code, 1, testHold("o-2", 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)
	require.EqualValues(t, 1, g.SoldOutHits(), "taking the last use marks the code")

	// A release that gives nothing back keeps the cache.
	released, err := g.Release(ctx, v.Code, "unknown", voucher.ReleaseMark)
	require.NoError(t, err)
	require.False(t, released)
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-2", 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)
	require.EqualValues(t, 2, g.SoldOutHits())

	released, err = g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-2", 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	require.EqualValues(t, 2, g.SoldOutHits())

	// Sold out again: the new copy knows the release and the new holder.
	waitSoldOutCached(t, g, v.Code)
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReleased, d.Outcome)
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-2", 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	require.EqualValues(t, 4, g.SoldOutHits())

	// An adopted hold is missing from the copy: adopting clears it.
	adopted, err := g.Adopt(ctx, v.Code, testHold("o-3", 3))
	require.NoError(t, err)
	require.True(t, adopted)
	require.Nil(t, g.soldOut.get(v.Code))
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-3", 3))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	require.EqualValues(t, 4, g.SoldOutHits(), "Redis answered")
}

// TestSoldOutCacheAcrossInstances: a second gate on the same keys stands for
// another instance. Its changes are seen here once the entry expires; an
// unchanged voucher renews its copy without reading it again.
func TestSoldOutCacheAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	g := newGate(t, Config{Clock: clock.Now, SoldOutTTL: time.Second})
	other, err := New(Config{Addrs: g.cfg.Addrs, KeyPrefix: g.cfg.KeyPrefix, SoldOutTTL: -1})
	require.NoError(t, err)
	t.Cleanup(other.Close)
	v := testVoucher("SHARED", 2, 1)
	loadEmpty(t, g, v)
	for i := range 2 {
		_, err := g.Reserve(ctx, v.Code, 1, testHold(orderID(i), int64(i+1)))
		require.NoError(t, err)
	}
	waitSoldOutCached(t, g, v.Code)
	require.EqualValues(t, 1, g.soldOut.copies.Load())

	// Nothing changed: after the TTL, Redis's sold-out answer renews the
	// copy without reading it again.
	for range 3 {
		clock.Add(time.Second)
		d, err := g.Reserve(ctx, v.Code, 1, testHold("late", 99))
		require.NoError(t, err)
		require.Equal(t, voucher.GateSoldOut, d.Outcome)
		require.NotNil(t, g.soldOut.get(v.Code), "renewed at once")
	}
	require.EqualValues(t, 1, g.soldOut.copies.Load())

	// The other instance releases order-0 and a new order takes its use.
	released, err := other.Release(ctx, v.Code, orderID(0), voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	d, err := other.Reserve(ctx, v.Code, 1, testHold("new", 50))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)

	// Within the TTL this instance does not know (the documented window).
	d, err = g.Reserve(ctx, v.Code, 1, testHold("new", 50))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)
	d, err = g.Reserve(ctx, v.Code, 1, testHold(orderID(0), 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)

	// After it, the new version makes it read a new copy.
	clock.Add(time.Second)
	d, err = g.Reserve(ctx, v.Code, 1, testHold("new", 50))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome, "from Redis")
	d, err = g.Reserve(ctx, v.Code, 1, testHold("late", 99))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)
	waitSoldOutCached(t, g, v.Code)
	require.EqualValues(t, 2, g.soldOut.copies.Load())
	hits := g.SoldOutHits()
	d, err = g.Reserve(ctx, v.Code, 1, testHold("new", 50))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	d, err = g.Reserve(ctx, v.Code, 1, testHold(orderID(0), 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReleased, d.Outcome)
	require.Equal(t, hits+2, g.SoldOutHits(), "both from the new copy")
}

// TestSoldOutCacheWithoutVersion: a voucher loaded by a gate without the
// version key is still cached, its copy read again at every expiry.
func TestSoldOutCacheWithoutVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	g := newGate(t, Config{Clock: clock.Now, SoldOutTTL: time.Second})
	v := testVoucher("OLDLOAD", 1, 1)
	loadEmpty(t, g, v)
	c := rawClient(t, g)
	noVersion := func() {
		require.NoError(t, c.Do(ctx, c.B().Del().Key(keysFor(g.cfg.KeyPrefix, v.Code).version).Build()).Error())
	}
	noVersion()

	_, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	waitSoldOutCached(t, g, v.Code)
	require.Positive(t, rawTTL(t, g, keysFor(g.cfg.KeyPrefix, v.Code).version), "the version the take created expires")
	noVersion() // as if an older gate had taken the use
	for i := range 2 {
		clock.Add(time.Second)
		d, err := g.Reserve(ctx, v.Code, 1, testHold("late", 99))
		require.NoError(t, err)
		require.Equal(t, voucher.GateSoldOut, d.Outcome)
		waitSoldOutCached(t, g, v.Code)
		require.EqualValues(t, 2+i, g.soldOut.copies.Load())
	}
	d, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
}

// TestVersionChangesWithTheOrders checks that every script that changes the
// orders hash bumps the version, and nothing else does, so that a renewed
// copy is exact.
func TestVersionChangesWithTheOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("VERSIONS", 3, 2)
	k := keysFor(g.cfg.KeyPrefix, v.Code)
	c := rawClient(t, g)
	version := func() int64 {
		n, err := c.Do(ctx, c.B().Get().Key(k.version).Build()).AsInt64()
		require.NoError(t, err)
		return n
	}
	pending := testHold("o-2", 1)
	pending.Pending = true
	steps := []struct {
		name    string
		do      func() error
		changes bool
	}{
		{"load", func() error { _, err := g.Load(ctx, voucher.Snapshot{Voucher: v}); return err }, true},
		{"take", func() error { _, err := g.Reserve(ctx, v.Code, 2, testHold("o-1", 1)); return err }, true},
		{"replay", func() error { _, err := g.Reserve(ctx, v.Code, 2, testHold("o-1", 1)); return err }, false},
		{"take pending", func() error { _, err := g.Reserve(ctx, v.Code, 2, pending); return err }, true},
		{"quota held", func() error { _, err := g.Reserve(ctx, v.Code, 2, testHold("o-3", 1)); return err }, false},
		{"commit", func() error { _, err := g.Commit(ctx, v.Code, pending); return err }, true},
		{"commit again", func() error { _, err := g.Commit(ctx, v.Code, pending); return err }, false},
		{"release", func() error { _, err := g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark); return err }, true},
		{"release again", func() error { _, err := g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark); return err }, false},
		{"release forget", func() error { _, err := g.Release(ctx, v.Code, "o-2", voucher.ReleaseForget); return err }, true},
		{"adopt", func() error { _, err := g.Adopt(ctx, v.Code, testHold("o-9", 9)); return err }, true},
		{"adopt again", func() error { _, err := g.Adopt(ctx, v.Code, testHold("o-9", 9)); return err }, false},
		{"adjust", func() error { return g.AdjustLimit(ctx, v, -10) }, false},
		{"sold out", func() error { _, err := g.Reserve(ctx, v.Code, 2, testHold("o-4", 4)); return err }, false},
		{"clamp", func() error { _, _, err := g.Clamp(ctx, v.Code, 3); return err }, false},
		{"forget", func() error { return g.Forget(ctx, v.Code) }, false},
		{"load again", func() error { _, err := g.Load(ctx, voucher.Snapshot{Voucher: v}); return err }, true},
	}
	var last int64
	for _, st := range steps {
		require.NoError(t, st.do(), st.name)
		now := version()
		if st.changes {
			require.Equal(t, last+1, now, st.name)
		} else {
			require.Equal(t, last, now, st.name)
		}
		last = now
		require.Greater(t, rawTTL(t, g, k.version), time.Hour, st.name)
	}
}

// TestSoldOutCacheSkipsBigVouchers: a voucher with more orders than
// SoldOutMaxOrders is not cached; every request goes to Redis.
func TestSoldOutCacheSkipsBigVouchers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: time.Hour, SoldOutMaxOrders: 2})
	small, big := testVoucher("SMALL", 2, 1), testVoucher("BIG", 3, 1)
	for _, v := range []voucher.Voucher{small, big} {
		loadEmpty(t, g, v)
		for i := range int(v.TotalLimit) {
			d, err := g.Reserve(ctx, v.Code, 1, testHold(orderID(i), int64(i+1)))
			require.NoError(t, err)
			require.Equal(t, voucher.GateTaken, d.Outcome)
		}
	}
	waitSoldOutCached(t, g, small.Code)
	require.Eventually(t, func() bool {
		e, ok := g.soldOut.m.Load(big.Code)
		return ok && e.(*soldOutEntry).skip
	}, 5*time.Second, 5*time.Millisecond)
	for range 3 {
		d, err := g.Reserve(ctx, big.Code, 1, testHold("late", 99))
		require.NoError(t, err)
		require.Equal(t, voucher.GateSoldOut, d.Outcome)
	}
	require.Zero(t, g.SoldOutHits(), "the big voucher is answered by Redis")
	d, err := g.Reserve(ctx, small.Code, 1, testHold("late", 99))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)
	require.EqualValues(t, 1, g.SoldOutHits())
}

// gateCalls lists every call of the Gate, for the tests of Redis outages.
func gateCalls(g *Gate, v voucher.Voucher) map[string]func() error {
	ctx := context.Background()
	return map[string]func() error{
		"reserve": func() error { _, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1)); return err },
		"lookup":  func() error { _, _, err := g.Lookup(ctx, v.Code, "o-1"); return err },
		"commit":  func() error { _, err := g.Commit(ctx, v.Code, testHold("o-1", 1)); return err },
		"release": func() error { _, err := g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark); return err },
		"load":    func() error { _, err := g.Load(ctx, voucher.Snapshot{Voucher: v}); return err },
		"loaded":  func() error { _, err := g.Loaded(ctx, v.Code); return err },
		"adjust":  func() error { return g.AdjustLimit(ctx, v, 1) },
		"lock":    func() error { _, _, err := g.Lock(ctx, v.Code, time.Second); return err },
		"ping":    func() error { return g.Ping(ctx) },
		"inspect": func() error { _, err := g.Inspect(ctx, v.Code); return err },
		"forget":  func() error { return g.Forget(ctx, v.Code) },
		"adopt":   func() error { _, err := g.Adopt(ctx, v.Code, testHold("o-1", 1)); return err },
		"clamp":   func() error { _, _, err := g.Clamp(ctx, v.Code, 5); return err },
	}
}

// requireAllUnavailable checks that every call fails fast with
// CodeUnavailable.
func requireAllUnavailable(t *testing.T, g *Gate, v voucher.Voucher) {
	t.Helper()
	for name, call := range gateCalls(g, v) {
		start := time.Now()
		err := call()
		require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "%s: %v", name, err)
		require.Less(t, time.Since(start), 5*time.Second, name)
	}
}

// TestRedisDownIsUnavailable checks that every call fails with
// CodeUnavailable while Redis is down, and works again once it is back.
func TestRedisDownIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewRedis(t)
	g := newGate(t, Config{Timeout: 300 * time.Millisecond}, srv.Addr)
	v := testVoucher("DOWN", 5, 1)
	loadEmpty(t, g, v)

	srv.Kill(t)
	requireAllUnavailable(t, g, v)

	// Back again (empty: persistence is off), the same gate reconnects.
	srv.Start(t)
	require.Eventually(t, func() bool { return g.Ping(ctx) == nil }, 10*time.Second, 50*time.Millisecond)
	d, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateNotLoaded, d.Outcome)
}

// TestNewWithoutRedis: a gate starts while Redis is down, answers
// CodeUnavailable, and connects by itself once Redis is up.
func TestNewWithoutRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewRedis(t)
	srv.Stop(t)
	g := newGate(t, Config{Timeout: 300 * time.Millisecond}, srv.Addr)
	v := testVoucher("NOREDIS", 5, 1)

	requireAllUnavailable(t, g, v)
	err := g.Ping(ctx)
	require.ErrorIs(t, err, errNotConnected)
	require.ErrorContains(t, err, srv.Addr, "the dial error says where")

	srv.Start(t)
	start := time.Now()
	require.Eventually(t, func() bool { return g.Ping(ctx) == nil }, 5*time.Second, 20*time.Millisecond)
	t.Logf("connected %s after Redis started", time.Since(start).Round(time.Millisecond))
	loadEmpty(t, g, v)
	d, err := g.Reserve(ctx, v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
}

// TestCloseWithoutRedis: Close stops the connecting loop promptly, and a
// closed gate stays unusable even when Redis comes up.
func TestCloseWithoutRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewRedis(t)
	srv.Stop(t)
	g, err := New(Config{Addrs: []string{srv.Addr}})
	require.NoError(t, err)
	start := time.Now()
	g.Close()
	g.Close()
	require.Less(t, time.Since(start), 2*time.Second)
	srv.Start(t)
	time.Sleep(2 * dialRetry)
	require.ErrorIs(t, g.Ping(ctx), errNotConnected)
}

// TestNewRefusesWrongCredentials: credentials Redis refuses are a
// configuration error, not an outage.
func TestNewRefusesWrongCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewRedis(t)
	g := newGate(t, Config{}, srv.Addr)
	c := rawClient(t, g)
	require.NoError(t, c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("requirepass", "secret").Build()).Error())

	_, err := New(Config{Addrs: []string{srv.Addr}, Password: "wrong"})
	require.Error(t, err)
	require.False(t, voucher.IsCode(err, voucher.CodeUnavailable), err)
	t.Logf("wrong password: %v", err)
	_, err = New(Config{Addrs: []string{srv.Addr}})
	require.Error(t, err, "no password")
	t.Logf("no password: %v", err)
	ok, err := New(Config{Addrs: []string{srv.Addr}, Password: "secret"})
	require.NoError(t, err)
	require.NoError(t, ok.Ping(ctx))
	ok.Close()
}

func TestCallerDeadlineIsUnavailable(t *testing.T) {
	t.Parallel()
	g := newGate(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := g.Loaded(ctx, "ANY")
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), err)
	require.ErrorIs(t, err, context.Canceled)
}

func TestConcurrentReserveSingle(t *testing.T) {
	t.Parallel()
	testConcurrentReserve(t, newGate(t, Config{SoldOutTTL: -1}))
}

func TestConcurrentReserveCluster(t *testing.T) {
	t.Parallel()
	cluster := testenv.NewRedisCluster(t)
	g := newGate(t, Config{SoldOutTTL: -1}, cluster.Addrs...)
	require.Len(t, rawClient(t, g).Nodes(), 3, "a cluster client, not a single node")
	testConcurrentReserve(t, g)

	// The sold-out copy is read from the voucher's node too.
	ctx := context.Background()
	cached := newGate(t, Config{SoldOutTTL: time.Minute}, cluster.Addrs...)
	v := testVoucher("CLUSTERCOPY", 2, 1)
	loadEmpty(t, cached, v)
	for i := range 2 {
		_, err := cached.Reserve(ctx, v.Code, 1, testHold(orderID(i), int64(i+1)))
		require.NoError(t, err)
	}
	waitSoldOutCached(t, cached, v.Code)
	d, err := cached.Reserve(ctx, v.Code, 1, testHold(orderID(1), 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	require.EqualValues(t, 1, cached.SoldOutHits())
}

func TestConcurrentReserveWithSoldOutCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: time.Minute})
	testConcurrentReserve(t, g)

	// Every winner's retry is a replay answered from the cache.
	waitSoldOutCached(t, g, "RUSH")
	st, err := g.Inspect(ctx, "RUSH")
	require.NoError(t, err)
	hits := g.SoldOutHits()
	for id, h := range st.Orders {
		d, err := g.Reserve(ctx, "RUSH", 1, testHoldFor(id, h.CustomerID))
		require.NoError(t, err)
		require.Equal(t, voucher.GateReplay, d.Outcome, id)
		require.Equal(t, h, d.Hold, id)
	}
	require.EqualValues(t, hits+uint64(len(st.Orders)), g.SoldOutHits())
}

// testConcurrentReserve sends 5,000 reservations from distinct customers,
// 200 at a time, at a voucher of 1,000 uses: exactly 1,000 are taken.
func testConcurrentReserve(t *testing.T, g *Gate) {
	const (
		total    = 1000
		requests = 5000
		workers  = 200
	)
	ctx := context.Background()
	v := testVoucher("RUSH", total, 1)
	loadEmpty(t, g, v)

	var taken, soldOut atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for i := range next {
				d, err := g.Reserve(ctx, v.Code, 1, testHold(orderID(i), int64(i+1)))
				if err != nil {
					errs <- err
					return
				}
				switch d.Outcome {
				case voucher.GateTaken:
					taken.Add(1)
				case voucher.GateSoldOut:
					soldOut.Add(1)
				default:
					errs <- voucher.Errorf(voucher.CodeInternal, "unexpected outcome %s", d.Outcome)
					return
				}
			}
		})
	}
feed:
	for i := range requests {
		select {
		case next <- i:
		case err := <-errs:
			t.Errorf("reserve: %v", err)
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("reserve: %v", err)
	}
	require.False(t, t.Failed())

	require.EqualValues(t, total, taken.Load())
	require.EqualValues(t, requests-total, soldOut.Load())
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.Zero(t, st.Remaining)
	require.Len(t, st.Users, total)
	require.EqualValues(t, total, st.Held())
}

// A fencer takes a pending hold over from its writer: the hold keeps its
// use and its fields, only its owner changes, and from then on the writer's
// commit is refused while the fencer's is made. A durable hold is not
// taken over (its writer committed it), nor a released or unknown one.
func TestTakeOverRefusesTheWritersCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("TAKEOVER", 5, 1)
	loadEmpty(t, g, v)
	pending := func(orderID string, customer int64) voucher.Hold {
		h := testHold(orderID, customer)
		h.Pending, h.Owner = true, "writer-1"
		d, err := g.Reserve(ctx, v.Code, 1, h)
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
		return h
	}

	h := pending("o-1", 1)
	got, err := g.TakeOver(ctx, v.Code, h, "fencer-2")
	require.NoError(t, err)
	require.Equal(t, voucher.GateTakenOver, got)
	got, err = g.TakeOver(ctx, v.Code, h, "fencer-2")
	require.NoError(t, err)
	require.Equal(t, voucher.GateTakenOver, got, "taken over already: the fencer's")
	got, err = g.TakeOver(ctx, v.Code, h, "fencer-3")
	require.NoError(t, err)
	require.Equal(t, voucher.GateHoldGone, got, "another fencer's now")
	stored, found, err := g.Lookup(ctx, v.Code, "o-1")
	require.NoError(t, err)
	require.True(t, found)
	want := h
	want.Owner = "fencer-2"
	require.Equal(t, want, stored, "only the owner changed")
	c, err := g.Counts(ctx, v.Code)
	require.NoError(t, err)
	require.Equal(t, int64(4), c.Remaining, "the hold keeps its use")

	ok, err := g.Commit(ctx, v.Code, h)
	require.NoError(t, err)
	require.False(t, ok, "the writer's commit is refused")
	ok, err = g.Commit(ctx, v.Code, want)
	require.NoError(t, err)
	require.True(t, ok, "the fencer's commit is made")

	durable := pending("o-2", 2)
	ok, err = g.Commit(ctx, v.Code, durable)
	require.NoError(t, err)
	require.True(t, ok)
	got, err = g.TakeOver(ctx, v.Code, durable, "fencer-2")
	require.NoError(t, err)
	require.Equal(t, voucher.GateHoldDurable, got)

	released := pending("o-3", 3)
	_, err = g.Release(ctx, v.Code, "o-3", voucher.ReleaseMark)
	require.NoError(t, err)
	for _, h := range []voucher.Hold{released, testHold("unknown", 4)} {
		got, err = g.TakeOver(ctx, v.Code, h, "fencer-2")
		require.NoError(t, err)
		require.Equal(t, voucher.GateHoldGone, got, h.OrderID)
	}
}
