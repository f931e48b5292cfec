package redisgate

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// commandCounter reads the calls of each command a Redis server has run
// (INFO commandstats), the commands scripts run included.
type commandCounter struct {
	c rueidis.Client
}

func newCommandCounter(tb testing.TB, addr string) *commandCounter {
	tb.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(tb, err)
	tb.Cleanup(c.Close)
	return &commandCounter{c: c}
}

// calls returns the calls so far by lower-case command name, INFO's own
// left out.
func (cc *commandCounter) calls(tb testing.TB) map[string]int64 {
	tb.Helper()
	info, err := cc.c.Do(context.Background(), cc.c.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(tb, err)
	calls := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name == "cmdstat_info" {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		require.NoError(tb, err)
		calls[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return calls
}

// during returns the commands Redis ran while f ran, by name, with none
// left out.
func (cc *commandCounter) during(tb testing.TB, f func()) map[string]int64 {
	tb.Helper()
	before := cc.calls(tb)
	f()
	diff := map[string]int64{}
	for name, n := range cc.calls(tb) {
		if d := n - before[name]; d != 0 {
			diff[name] = d
		}
	}
	return diff
}

func sumCalls(calls map[string]int64) int64 {
	var n int64
	for _, c := range calls {
		n += c
	}
	return n
}

// TestTakeCommands pins what one take asks of Redis: one script
// (EVALSHA), and the commands it runs. A take into hashes that exist, the
// take of every flash sale's request but the first, reads no expiry; a take
// that creates the hashes gives them the voucher's expiry
// (TestReserveGivesNewHashesTheVoucherExpiry).
func TestTakeCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewRedis(t) // commandstats count the whole server: a Redis of its own
	cc := newCommandCounter(t, srv.Addr)
	g := newGate(t, Config{SoldOutTTL: -1}, srv.Addr)
	v := testVoucher("COST", 100, 1)
	loadEmpty(t, g, v)
	take := func(orderID string, customer int64) map[string]int64 {
		return cc.during(t, func() {
			d, err := g.Reserve(ctx, v.Code, 1, testHold(orderID, customer))
			require.NoError(t, err)
			require.Equal(t, voucher.GateTaken, d.Outcome)
		})
	}
	// The first take sends the script (NOSCRIPT, then EVAL) and creates the
	// hashes.
	t.Logf("the first take's commands: %v", take("cost-0", 1))

	steady := take("cost-1", 2)
	t.Logf("a take's commands: %v (%d)", steady, sumCalls(steady))
	require.EqualValues(t, 1, steady["evalsha"], "%v", steady)
	require.Zero(t, steady["pttl"], "a take into existing hashes reads no expiry: %v", steady)
	// GET and HGET (known order), HEXISTS (voided), HGET (quota), EXISTS
	// (hashes to create), DECR, HINCRBY, HSET, EXISTS and INCRBY (held),
	// HEXISTS (budget), INCR (version).
	require.EqualValues(t, 12, sumCalls(steady)-1, "%v", steady)
}
