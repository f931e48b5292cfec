package redisgate

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// requireHeldCount checks that the held count of code is exact: counted,
// and equal to the orders holding a use.
func requireHeldCount(t *testing.T, g *Gate, code string) {
	t.Helper()
	st, err := g.Inspect(context.Background(), code)
	require.NoError(t, err)
	require.True(t, st.HeldCounted, "the held count is kept")
	require.Equal(t, st.Held(), st.HeldCount, "the held count is the orders holding a use")
}

// TestHeldCountKeptByEveryScript runs every script that changes whether an
// order holds a use and checks the held count after each.
func TestHeldCountKeptByEveryScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("HELDCOUNT", 10, 3)
	loadEmpty(t, g, v)
	requireHeldCount(t, g, v.Code)

	for i := range 4 {
		d, err := g.Reserve(ctx, v.Code, 3, testHold(orderID(i), int64(i%2)))
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
		requireHeldCount(t, g, v.Code)
	}
	// A replay takes nothing.
	_, err := g.Reserve(ctx, v.Code, 3, testHold(orderID(0), 0))
	require.NoError(t, err)
	requireHeldCount(t, g, v.Code)

	d, err := g.Replace(ctx, v.Code, testHold("new-0", 0), orderID(0))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	requireHeldCount(t, g, v.Code)
	undone, err := g.Unreplace(ctx, v.Code, "new-0", orderID(0))
	require.NoError(t, err)
	require.True(t, undone)
	requireHeldCount(t, g, v.Code)

	for _, mode := range []voucher.ReleaseMode{voucher.ReleaseMark, voucher.ReleaseForget} {
		id := orderID(1)
		if mode == voucher.ReleaseForget {
			id = orderID(2)
		}
		gave, err := g.Release(ctx, v.Code, id, mode)
		require.NoError(t, err)
		require.True(t, gave)
		requireHeldCount(t, g, v.Code)
		gave, err = g.Release(ctx, v.Code, id, mode)
		require.NoError(t, err)
		require.False(t, gave)
		requireHeldCount(t, g, v.Code)
	}

	pending := testHold("pending-1", 5)
	pending.Pending = true
	_, err = g.Reserve(ctx, v.Code, 3, pending)
	require.NoError(t, err)
	requireHeldCount(t, g, v.Code)
	_, err = g.Commit(ctx, v.Code, pending)
	require.NoError(t, err)
	_, err = g.Confirm(ctx, v.Code, "pending-1", "")
	require.NoError(t, err)
	requireHeldCount(t, g, v.Code)

	adopted, err := g.Adopt(ctx, v.Code, testHold("adopted-1", 6))
	require.NoError(t, err)
	require.True(t, adopted)
	requireHeldCount(t, g, v.Code)

	before, after, err := g.Clamp(ctx, v.Code, v.TotalLimit)
	require.NoError(t, err)
	require.Equal(t, before, after, "the counts agree: nothing to clamp")
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, v.TotalLimit, st.Remaining+st.HeldCount)
}

// TestHeldCountCountedInChunksUnderLoad: a voucher loaded before the held
// count existed is counted in chunks by Clamp while reservations, releases
// and replacements run; the count ends exact and the clamp lowers nothing.
func TestHeldCountCountedInChunksUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{ScanCount: 7})
	v := testVoucher("HELDINIT", 100_000, 1000)
	loadEmpty(t, g, v)
	for i := range 600 {
		_, err := g.Reserve(ctx, v.Code, 1000, testHold(orderID(i), int64(i%13)))
		require.NoError(t, err)
	}
	c := rawClient(t, g)
	k := keysFor(g.cfg.KeyPrefix, v.Code)
	require.NoError(t, c.Do(ctx, c.B().Del().Key(k.held).Build()).Error())
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.False(t, st.HeldCounted, "no count: the scripts leave it absent")

	for round := range 5 {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := "r" + strconv.Itoa(round) + "-" + strconv.Itoa(i)
				_, err := g.Reserve(ctx, v.Code, 1000, testHold(id, int64(i%13)))
				if !assert.NoError(t, err) {
					return
				}
				switch i % 3 {
				case 0:
					_, err = g.Release(ctx, v.Code, id, voucher.ReleaseMark)
				case 1:
					_, err = g.Release(ctx, v.Code, orderID(i%600), voucher.ReleaseForget)
				case 2:
					_, err = g.Replace(ctx, v.Code, testHold(id+"x", int64(i%13)), id)
				}
				if !assert.NoError(t, err) {
					return
				}
			}
		})
		before, after, err := g.Clamp(ctx, v.Code, v.TotalLimit)
		close(stop)
		wg.Wait()
		require.NoError(t, err)
		require.Equal(t, before, after, "round %d: an exact count clamps nothing", round)
		requireHeldCount(t, g, v.Code)
		if round < 4 {
			// Lose the count again, with a count under way half done.
			require.NoError(t, c.Do(ctx, c.B().Del().Key(k.held).Build()).Error())
			if round%2 == 1 {
				res, err := heldInitScript.Exec(ctx, c, []string{k.remaining, k.orders, k.held, k.heldScan},
					[]string{"0", "7"}).ToArray()
				require.NoError(t, err)
				status, _ := res[0].AsInt64()
				require.EqualValues(t, 2, status)
			}
		}
	}
}

// TestReconcileCommandsShortAtSize: with 200,000 holds in a voucher loaded
// before the held count existed, what reconciliation asks of Redis (inspect,
// counting, clamp, single repairs) and reservations are short commands,
// checked in SLOWLOG (requireShortCommands). A script reading the whole
// voucher runs several hundred milliseconds at this size, every time.
func TestReconcileCommandsShortAtSize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200,000 holds")
	}
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewRedis(t) // SLOWLOG is the server's: a Redis of its own
	g := newGate(t, Config{}, srv.Addr)
	c := rawClient(t, g)
	v := testVoucher("BIGGATE", 1_000_000, 5)
	loadEmpty(t, g, v)
	k := keysFor(g.cfg.KeyPrefix, v.Code)

	const n = 200_000
	cmds := make(rueidis.Commands, 0, n/500+1)
	fields := make([]string, 0, 1000)
	users := map[string]int64{}
	for i := range n {
		h := testHold("big-"+strconv.Itoa(i), int64(i%50_000))
		state := byte(stateHeld)
		if i%10 == 0 {
			state = stateReleased
		} else {
			users[h.CustomerID]++
		}
		fields = append(fields, h.OrderID, encodeHold(state, h))
		if len(fields) == 1000 || i == n-1 {
			b := c.B().Hset().Key(k.orders).FieldValue()
			for j := 0; j < len(fields); j += 2 {
				b = b.FieldValue(fields[j], fields[j+1])
			}
			cmds = append(cmds, b.Build())
			fields = fields[:0]
		}
	}
	for cust, m := range users {
		cmds = append(cmds, c.B().Hset().Key(k.users).FieldValue().FieldValue(cust, strconv.FormatInt(m, 10)).Build())
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		require.NoError(t, r.Error())
	}
	// Remaining 17 above totalLimit - held: uses the clamp takes back.
	held := int64(n - n/10)
	require.NoError(t, c.Do(ctx, c.B().Set().Key(k.remaining).Value(strconv.FormatInt(int64(v.TotalLimit)-held+17, 10)).Build()).Error())
	require.NoError(t, c.Do(ctx, c.B().Del().Key(k.held).Build()).Error())

	resetCommandStats(t, c)

	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.Len(t, st.Orders, n)
	require.EqualValues(t, held, st.Held())
	before, after, err := g.Clamp(ctx, v.Code, v.TotalLimit)
	require.NoError(t, err)
	require.Equal(t, before-17, after, "the clamp lowers the 17 uses too many")
	st, err = g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.True(t, st.HeldCounted)
	require.Equal(t, held, st.HeldCount)
	_, err = g.Adopt(ctx, v.Code, testHold("adopted", 1))
	require.NoError(t, err)
	_, err = g.Release(ctx, v.Code, "big-1", voucher.ReleaseMark)
	require.NoError(t, err)
	_, err = g.Reserve(ctx, v.Code, 5, testHold("after", 60_001))
	require.NoError(t, err)
	_, _, err = g.Clamp(ctx, v.Code, v.TotalLimit)
	require.NoError(t, err)
	requireHeldCount(t, g, v.Code)

	// Give a background free (UNLINK) time to show if it were not one.
	time.Sleep(100 * time.Millisecond)
	requireShortCommands(t, c, 5*time.Millisecond, 250*time.Millisecond)
}

// resetCommandStats clears SLOWLOG and the command statistics of the
// server behind c and logs every command of at least 5ms from now on.
func resetCommandStats(t *testing.T, c rueidis.Client) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "5000").
		ParameterValue("slowlog-max-len", "10000").Build()).Error())
	require.NoError(t, c.Do(ctx, c.B().SlowlogReset().Build()).Error())
	require.NoError(t, c.Do(ctx, c.B().ConfigResetstat().Build()).Error())
}

// requireShortCommands checks the commands run since resetCommandStats
// (SLOWLOG, INFO commandstats). With VOUCHERD_TEST_QUIET=1 (a machine doing
// nothing else) no command may reach slow. Otherwise, since SLOWLOG
// measures wall time and a server that is not scheduled for a while logs a
// command of half a millisecond at tens, the bounds allow for a shared
// machine: each kind of command run at least averagedCalls times averages
// under slow (fewer calls make no average: one descheduled call decides
// it), fewer than 5% of the commands reach slow, and none reaches tooSlow.
func requireShortCommands(t *testing.T, c rueidis.Client, slow, tooSlow time.Duration) {
	const averagedCalls = 20
	t.Helper()
	if os.Getenv("VOUCHERD_TEST_QUIET") == "1" {
		tooSlow = slow
	}
	ctx := context.Background()
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	var calls int64
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var n, usec int64
		var perCall float64
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				n, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			case "usec_per_call":
				perCall, _ = strconv.ParseFloat(v, 64)
			}
		}
		if name == "cmdstat_evalsha" || name == "cmdstat_eval" || name == "cmdstat_hscan" {
			// What the gate sends (HSCAN also counts those run in scripts).
			calls += n
		}
		t.Logf("%s: %d calls, %dµs, %.1fµs a call", name, n, usec, perCall)
		if n >= averagedCalls || tooSlow == slow {
			require.Less(t, perCall, float64(slow.Microseconds()), "%s averages under %s", name, slow)
		}
	}
	entries, err := c.Do(ctx, c.B().SlowlogGet().Count(-1).Build()).ToArray()
	require.NoError(t, err)
	var slowN int64
	for _, e := range entries {
		f, err := e.ToArray()
		require.NoError(t, err)
		us, _ := f[2].AsInt64()
		args, _ := f[3].AsStrSlice()
		if len(args) > 0 && (args[0] == "CONFIG" || args[0] == "SLOWLOG" || args[0] == "INFO") {
			continue
		}
		if len(args) > 3 {
			args = args[:3]
		}
		d := time.Duration(us) * time.Microsecond
		t.Logf("slow: %s %q", d, args)
		require.Less(t, d, tooSlow, "no command runs %s", tooSlow)
		if d >= slow {
			slowN++
		}
	}
	require.Positive(t, calls)
	require.Less(t, float64(slowN), 0.05*float64(calls), "%d of %d commands ran %s or more", slowN, calls, slow)
}
