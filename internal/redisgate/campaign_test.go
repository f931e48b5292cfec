package redisgate

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// campaignHold is testHold for a flash campaign's code.
func campaignHold(orderID string, customer int64, code string) voucher.Hold {
	h := testHold(orderID, customer)
	h.Code = code
	return h
}

// reserveOutcome reserves h under code and returns the outcome.
func reserveOutcome(t *testing.T, g *Gate, code string, perUser int32, h voucher.Hold) voucher.GateOutcome {
	t.Helper()
	d, err := g.Reserve(context.Background(), code, perUser, h)
	require.NoError(t, err)
	return d.Outcome
}

// requireCodes asserts the codes the gate holds for the budget code.
func requireCodes(t *testing.T, g *Gate, code string, want map[string]string) {
	t.Helper()
	st, err := g.Inspect(context.Background(), code)
	require.NoError(t, err)
	require.True(t, st.Loaded)
	if want == nil {
		want = map[string]string{}
	}
	require.Equal(t, want, st.Codes)
}

// A flash campaign is gated under its budget's keys: a code is held by one
// live order at a time, freed by a release (marked or forgotten), and an
// orderId asked again with another code is a conflict; replays answer the
// stored hold with its code.
func TestCampaignCodesInTheGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("cmp_GATE00000001", 5, 2)
	loadEmpty(t, g, v)
	requireCodes(t, g, v.Code, nil)

	a := campaignHold("o-1", 1, "CODE-A")
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 2, a))
	d, err := g.Reserve(ctx, v.Code, 2, a)
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	require.Equal(t, "CODE-A", d.Hold.Code)
	require.Equal(t, voucher.GateConflict, reserveOutcome(t, g, v.Code, 2, campaignHold("o-1", 1, "CODE-B")), "another code")
	require.Equal(t, voucher.GateConflict, reserveOutcome(t, g, v.Code, 2, testHold("o-1", 1)), "no code")
	require.Equal(t, voucher.GateCodeUsed, reserveOutcome(t, g, v.Code, 2, campaignHold("o-2", 2, "CODE-A")))
	require.Equal(t, voucher.GateCodeUsed, reserveOutcome(t, g, v.Code, 2, campaignHold("o-3", 1, "CODE-A")), "its own holder's customer too")
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "o-1"})

	// The validation answers as the reservation, writing nothing.
	vd, err := g.Validate(ctx, v.Code, 2, "o-2", "2", "CODE-A", voucher.TakeLimits{})
	require.NoError(t, err)
	require.Equal(t, voucher.GateCodeUsed, vd.Outcome)
	vd, err = g.Validate(ctx, v.Code, 2, "o-1", "1", "CODE-B", voucher.TakeLimits{})
	require.NoError(t, err)
	require.Equal(t, voucher.GateConflict, vd.Outcome)
	vd, err = g.Validate(ctx, v.Code, 2, "", "2", "CODE-B", voucher.TakeLimits{})
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, vd.Outcome)

	// A release frees the code; a forgotten order too.
	gave, err := g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, gave)
	requireCodes(t, g, v.Code, nil)
	require.Equal(t, voucher.GateReleased, reserveOutcome(t, g, v.Code, 2, a))
	b := campaignHold("o-2", 2, "CODE-A")
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 2, b))
	gave, err = g.Release(ctx, v.Code, "o-2", voucher.ReleaseForget)
	require.NoError(t, err)
	require.True(t, gave)
	requireCodes(t, g, v.Code, nil)
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 2, b), "a forgotten order may try again")
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "o-2"})

	// The hold's code survives the extension and the commit of a pending hold.
	p := campaignHold("o-4", 4, "CODE-P")
	p.Pending, p.Owner = true, "inst-1"
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 2, p))
	committed, err := g.Commit(ctx, v.Code, p)
	require.NoError(t, err)
	require.True(t, committed)
	changed, err := g.Extend(ctx, v.Code, "o-4", p.ExpiresAt.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, changed)
	h, found, err := g.Lookup(ctx, v.Code, "o-4")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "CODE-P", h.Code)
	require.Equal(t, "inst-1", h.Owner)
	require.Equal(t, p.ExpiresAt.Add(time.Minute), h.ExpiresAt)
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "o-2", "CODE-P": "o-4"})
}

// A replacement on a campaign frees the replaced order's code and takes the
// new order's, the same code or another; a code held by a third order is
// refused; an undone replacement gives the old order its code back.
func TestCampaignReplaceInTheGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("cmp_GATE00000002", 5, 5)
	loadEmpty(t, g, v)
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 5, campaignHold("o-1", 1, "CODE-A")))
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 5, campaignHold("o-9", 9, "CODE-Z")))

	d, err := g.Replace(ctx, v.Code, campaignHold("o-2", 1, "CODE-Z"), "o-1")
	require.NoError(t, err)
	require.Equal(t, voucher.GateCodeUsed, d.Outcome, "another order holds CODE-Z")
	d, err = g.Replace(ctx, v.Code, campaignHold("o-2", 1, "CODE-A"), "o-1")
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome, "the same code")
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "o-2", "CODE-Z": "o-9"})
	d, err = g.Replace(ctx, v.Code, campaignHold("o-3", 1, "CODE-B"), "o-2")
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome, "another code")
	requireCodes(t, g, v.Code, map[string]string{"CODE-B": "o-3", "CODE-Z": "o-9"})

	undone, err := g.Unreplace(ctx, v.Code, "o-3", "o-2")
	require.NoError(t, err)
	require.True(t, undone)
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "o-2", "CODE-Z": "o-9"})
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Remaining)
}

// A pending replacement (Kafka mode) on another code leaves the replaced
// order's code held by it until the replacement is committed, released
// for good (marked) or undone: until then PostgreSQL has the replaced order
// holding it. A forgotten replacement (its orderId another's, its event
// refused) leaves it too. The same code passes to the new order at once.
func TestCampaignPendingReplacementKeepsTheReplacedCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("cmp_GATE00000005", 10, 1)
	loadEmpty(t, g, v)
	pending := func(orderID string, customer int64, code string) voucher.Hold {
		h := campaignHold(orderID, customer, code)
		h.Pending = true
		return h
	}
	replace := func(h voucher.Hold, replaces string) {
		t.Helper()
		d, err := g.Replace(ctx, v.Code, h, replaces)
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
	}
	for _, h := range []voucher.Hold{campaignHold("a-1", 1, "CODE-A"), campaignHold("c-1", 3, "CODE-C"),
		campaignHold("e-1", 5, "CODE-E"), campaignHold("f-1", 6, "CODE-F"), campaignHold("g-1", 7, "CODE-G")} {
		require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 1, h))
	}

	// Committed: the old code comes free then, not before.
	replace(pending("a-2", 1, "CODE-B"), "a-1")
	require.Equal(t, voucher.GateCodeUsed, reserveOutcome(t, g, v.Code, 1, campaignHold("x-1", 9, "CODE-A")))
	vd, err := g.Validate(ctx, v.Code, 1, "", "9", "CODE-A", voucher.TakeLimits{})
	require.NoError(t, err)
	require.Equal(t, voucher.GateCodeUsed, vd.Outcome)
	d, err := g.Reserve(ctx, v.Code, 1, campaignHold("a-1", 1, "CODE-A"))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReleased, d.Outcome, "the replaced order is released at once")
	committed, err := g.Commit(ctx, v.Code, pending("a-2", 1, "CODE-B"))
	require.NoError(t, err)
	require.True(t, committed)
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 1, campaignHold("x-1", 9, "CODE-A")))
	freed, err := g.FreedFrom(ctx, v.Code, "CODE-A")
	require.NoError(t, err)
	require.Equal(t, "a-1", freed, "the order whose event x-1's write waits for")

	// Released for good (a fence): both codes come free.
	replace(pending("c-2", 3, "CODE-D"), "c-1")
	gave, err := g.Release(ctx, v.Code, "c-2", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, gave)

	// Undone: the old order holds its code again, the new code is free.
	replace(pending("e-2", 5, "CODE-H"), "e-1")
	undone, err := g.Unreplace(ctx, v.Code, "e-2", "e-1")
	require.NoError(t, err)
	require.True(t, undone)

	// Forgotten: the replaced order keeps its code.
	replace(pending("f-2", 6, "CODE-I"), "f-1")
	gave, err = g.Release(ctx, v.Code, "f-2", voucher.ReleaseForget)
	require.NoError(t, err)
	require.True(t, gave)

	// The same code passes to the new order at once.
	replace(pending("g-2", 7, "CODE-G"), "g-1")
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "x-1", "CODE-B": "a-2", "CODE-E": "e-1", "CODE-F": "f-1", "CODE-G": "g-2"})
	committed, err = g.Commit(ctx, v.Code, pending("g-2", 7, "CODE-G"))
	require.NoError(t, err)
	require.True(t, committed)
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "x-1", "CODE-B": "a-2", "CODE-E": "e-1", "CODE-F": "f-1", "CODE-G": "g-2"})
	for _, c := range []string{"CODE-C", "CODE-E", "CODE-F", "CODE-G"} {
		freed, err := g.FreedFrom(ctx, v.Code, c)
		require.NoError(t, err)
		require.Empty(t, freed, c)
	}

	// A load starts over: it waits for the consumer, so every replaced
	// order is in its snapshot.
	require.NoError(t, g.Forget(ctx, v.Code))
	loadEmpty(t, g, v)
	freed, err = g.FreedFrom(ctx, v.Code, "CODE-A")
	require.NoError(t, err)
	require.Empty(t, freed)
}

// The sold-out cache answers a code kept by an order a pending replacement
// replaced as Redis does: CODE_USED.
func TestCampaignSoldOutCacheKeepsTheReplacedCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: time.Hour})
	v := testVoucher("cmp_GATE00000006", 2, 1)
	loadEmpty(t, g, v)
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 1, campaignHold("o-1", 1, "CODE-A")))
	h := campaignHold("o-2", 1, "CODE-B")
	h.Pending = true
	d, err := g.Replace(ctx, v.Code, h, "o-1")
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	// The last use: the copy is read after the replacement.
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 1, campaignHold("o-3", 3, "CODE-C")))
	waitSoldOutCached(t, g, v.Code)
	d, err = g.Reserve(ctx, v.Code, 1, campaignHold("o-4", 4, "CODE-A"))
	require.NoError(t, err)
	require.True(t, d.Local)
	require.Equal(t, voucher.GateCodeUsed.String(), d.Outcome.String())
}

// A load from a snapshot rebuilds the codes of the held orders only, and an
// adoption takes its order's code, whichever order the gate had it for.
func TestCampaignLoadAndAdopt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("cmp_GATE00000003", 10, 5)
	at := time.Now().UTC().Truncate(time.Millisecond)
	row := func(order, code string, st voucher.Status) voucher.Redemption {
		return voucher.Redemption{OrderID: order, VoucherCode: code, CustomerID: "1", OrderAmount: 1, DiscountAmount: 1,
			Status: st, CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(time.Minute)}
	}
	snap := voucher.Snapshot{Voucher: v, Held: 2, Customers: map[string]int32{"1": 2}, Orders: []voucher.Redemption{
		row("o-1", "CODE-A", voucher.StatusReserved),
		row("o-2", "CODE-B", voucher.StatusConfirmed),
		row("o-3", "CODE-C", voucher.StatusReleased),
	}}
	wrote, err := g.Load(ctx, snap)
	require.NoError(t, err)
	require.True(t, wrote)
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "o-1", "CODE-B": "o-2"})
	d, err := g.Reserve(ctx, v.Code, 5, campaignHold("o-3", 1, "CODE-C"))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReleased, d.Outcome)
	require.Equal(t, voucher.GateCodeUsed, reserveOutcome(t, g, v.Code, 5, campaignHold("o-4", 2, "CODE-B")))
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 5, campaignHold("o-4", 2, "CODE-C")))

	adopted, err := g.Adopt(ctx, v.Code, campaignHold("o-5", 3, "CODE-C"))
	require.NoError(t, err)
	require.True(t, adopted)
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "o-1", "CODE-B": "o-2", "CODE-C": "o-5"})
	// o-4 gives its use back without taking CODE-C from o-5.
	gave, err := g.Release(ctx, v.Code, "o-4", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, gave)
	requireCodes(t, g, v.Code, map[string]string{"CODE-A": "o-1", "CODE-B": "o-2", "CODE-C": "o-5"})
}

// The sold-out cache of a campaign is its budget's: once the budget is sold
// out it answers an unknown orderId CODE_USED for a code a live order holds
// and sold out for a free one, a known orderId with another code a
// conflict, all without Redis.
func TestCampaignSoldOutCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: time.Hour})
	v := testVoucher("cmp_GATE00000004", 2, 1)
	loadEmpty(t, g, v)
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 1, campaignHold("o-1", 1, "CODE-A")))
	require.Equal(t, voucher.GateTaken, reserveOutcome(t, g, v.Code, 1, campaignHold("o-2", 2, "CODE-B")))
	waitSoldOutCached(t, g, v.Code)

	for _, tc := range []struct {
		hold voucher.Hold
		want voucher.GateOutcome
	}{
		{campaignHold("o-3", 3, "CODE-A"), voucher.GateCodeUsed},
		{campaignHold("o-3", 3, "CODE-C"), voucher.GateSoldOut},
		{campaignHold("o-1", 1, "CODE-C"), voucher.GateConflict},
		{campaignHold("o-1", 1, "CODE-A"), voucher.GateReplay},
	} {
		d, err := g.Reserve(ctx, v.Code, 1, tc.hold)
		require.NoError(t, err)
		require.True(t, d.Local, "%+v", tc.hold)
		require.Equal(t, tc.want.String(), d.Outcome.String(), "%+v", tc.hold)
		vd, err := g.Validate(ctx, v.Code, 1, tc.hold.OrderID, tc.hold.CustomerID, tc.hold.Code, voucher.TakeLimits{})
		require.NoError(t, err)
		require.Equal(t, tc.want.String(), vd.Outcome.String(), "validation of %+v", tc.hold)
	}
	vd, err := g.Validate(ctx, v.Code, 1, "", "3", "CODE-B", voucher.TakeLimits{})
	require.NoError(t, err)
	require.Equal(t, voucher.GateCodeUsed, vd.Outcome, "no orderId, a held code")

	// A release here clears the copy: the freed code and the use are Redis's
	// answer again.
	gave, err := g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, gave)
	d, err := g.Reserve(ctx, v.Code, 1, campaignHold("o-3", 3, "CODE-A"))
	require.NoError(t, err)
	require.False(t, d.Local)
	require.Equal(t, voucher.GateTaken, d.Outcome)
}

// BenchmarkCampaignGateMemory measures what a flash campaign costs Redis
// before and after a sale of 10,000 uses of distinct codes (the campaign may
// have any number of codes: only used ones reach Redis): the number of keys
// and their MEMORY USAGE, reported as metrics, and the share of the codes
// hash. Run with -benchtime=1x.
func BenchmarkCampaignGateMemory(b *testing.B) {
	const uses = 10_000
	ctx := context.Background()
	for b.Loop() {
		g := newGate(b, Config{SoldOutTTL: -1})
		v := testVoucher("cmp_MEMORY000001", uses, 1)
		loadEmpty(b, g, v)
		keysBefore, bytesBefore := gateFootprint(b, g, v.Code)
		for i := range uses {
			h := campaignHold(orderID(i), int64(i), "WELCOME-"+strconv.FormatInt(1_000_000_000+int64(i), 32))
			h.Owner = "instance-1"
			if d, err := g.Reserve(ctx, v.Code, 1, h); err != nil || d.Outcome != voucher.GateTaken {
				b.Fatalf("reserve %d: %v %v", i, d.Outcome, err)
			}
		}
		keysAfter, bytesAfter := gateFootprint(b, g, v.Code)
		b.ReportMetric(float64(keysBefore), "keys-before")
		b.ReportMetric(float64(bytesBefore), "bytes-before")
		b.ReportMetric(float64(keysAfter), "keys-after")
		b.ReportMetric(float64(bytesAfter), "bytes-after")
		b.ReportMetric(float64(bytesAfter-bytesBefore)/uses, "bytes/use")
		client := rawClient(b, g)
		codes, err := client.Do(ctx, client.B().MemoryUsage().Key(keysFor(g.cfg.KeyPrefix, v.Code).codes).Samples(0).Build()).AsInt64()
		require.NoError(b, err)
		b.ReportMetric(float64(codes)/uses, "codes-bytes/use")
	}
}

// gateFootprint counts the keys of the voucher keyed under code that
// exist, and adds up their MEMORY USAGE.
func gateFootprint(tb testing.TB, g *Gate, code string) (keys, bytes int64) {
	tb.Helper()
	client := rawClient(tb, g)
	k := keysFor(g.cfg.KeyPrefix, code)
	for _, key := range append(k.all(), k.version) {
		n, err := client.Do(context.Background(), client.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
		if rueidis.IsRedisNil(err) {
			continue
		}
		require.NoError(tb, err)
		keys++
		bytes += n
	}
	return keys, bytes
}
