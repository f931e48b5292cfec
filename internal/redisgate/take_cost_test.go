package redisgate

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// connectionCommands are the commands a client sends when it opens a
// connection (rueidis may open one while a count runs): not a take's.
var connectionCommands = map[string]bool{"hello": true, "client|setinfo": true, "client|setname": true,
	"client|tracking": true, "ping": true, "auth": true, "select": true}

// calls returns the calls so far by lower-case command name, INFO's own
// and connections' handshakes left out.
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
		if name = strings.TrimPrefix(name, "cmdstat_"); !connectionCommands[name] {
			calls[name] = v
		}
	}
	return calls
}

// during returns the commands Redis ran while f ran, by name, with none
// left out but connections' handshakes.
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

// queuedTake is the take of hold as the queue of combined takes holds it,
// for a test that hands a batch to takeBatch itself.
func queuedTake(perUserLimit int32, hold voucher.Hold) *takeReq {
	r := newTakeReq(perUserLimit, hold)
	r.done = make(chan struct{})
	return &r
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
	// GET (the remaining count), the two HMGETs (the orderId's hold, the
	// customer's count), EXISTS (a void hash, hashes to create), EXISTS
	// (held), HEXISTS (budget), INCR (version), then the writes: DECRBY,
	// the two HSETs, INCRBY (held).
	require.EqualValues(t, 11, sumCalls(steady)-1, "%v", steady)

	// Takes combined into one call cost one script call and the commands of
	// one take: the call reads the orderIds' holds and the customers' counts
	// with one HMGET each, and the facts of the voucher once; it bumps the
	// version once and writes the remaining count, the two hashes and the
	// held count once, after its last take.
	batch := make([]*takeReq, 10)
	for i := range batch {
		batch[i] = queuedTake(1, testHold("cost-b"+strconv.Itoa(i), int64(10+i)))
	}
	combined := cc.during(t, func() { g.takeBatch(v.Code, batch) })
	for _, r := range batch {
		require.NoError(t, r.err)
		require.Equal(t, voucher.GateTaken, r.dec.Outcome)
	}
	require.EqualValues(t, 1, combined["evalsha"], "%v", combined)
	require.EqualValues(t, 11, sumCalls(combined)-1, "%v", combined)
	for _, once := range []string{"get", "hexists", "incr", "decrby", "incrby"} {
		require.EqualValues(t, 1, combined[once], "%s: %v", once, combined)
	}
	require.EqualValues(t, 2, combined["hmget"], "%v", combined)
	require.EqualValues(t, 2, combined["hset"], "%v", combined)
	require.EqualValues(t, 2, combined["exists"], "%v", combined)
}

// TestCombinedCallMatchesTakesOneByOne: a call of many takes reads the
// holds and counts once and writes them once, after its last take; each of
// its takes must still see what the takes before it took. Random calls
// that repeat orderIds and customers (replays, conflicts, the per-user
// limit, the stock running out mid-call), with releases between them, are
// answered as the same takes made one call each answer them on a twin
// voucher, and leave the same remaining count, users and orders hashes and
// held count.
func TestCombinedCallMatchesTakesOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	c := rawClient(t, g)
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	for round := range 20 {
		combined, single := testVoucher("MIX-C"+strconv.Itoa(round), 9, 2), testVoucher("MIX-S"+strconv.Itoa(round), 9, 2)
		loadEmpty(t, g, combined)
		loadEmpty(t, g, single)
		for call := range 4 {
			batch := make([]*takeReq, 1+rng.IntN(16))
			holds := make([]voucher.Hold, len(batch))
			for i := range batch {
				holds[i] = testHold("mix-"+strconv.Itoa(rng.IntN(14)), int64(rng.IntN(5)))
				batch[i] = queuedTake(2, holds[i])
			}
			g.takeBatch(combined.Code, batch)
			for i, r := range batch {
				require.NoError(t, r.err)
				d, err := g.Reserve(ctx, single.Code, 2, holds[i])
				require.NoError(t, err)
				require.Equal(t, d.Outcome, r.dec.Outcome, "round %d call %d take %d (%s)", round, call, i, holds[i].OrderID)
				require.Equal(t, d.Remaining, r.dec.Remaining, "round %d call %d take %d", round, call, i)
				require.Equal(t, d.Hold, r.dec.Hold, "round %d call %d take %d", round, call, i)
			}
			ck, sk := keysFor(g.cfg.KeyPrefix, combined.Code), keysFor(g.cfg.KeyPrefix, single.Code)
			for _, pair := range [][2]string{{ck.users, sk.users}, {ck.orders, sk.orders}} {
				cm, err := c.Do(ctx, c.B().Hgetall().Key(pair[0]).Build()).AsStrMap()
				require.NoError(t, err)
				sm, err := c.Do(ctx, c.B().Hgetall().Key(pair[1]).Build()).AsStrMap()
				require.NoError(t, err)
				require.Equal(t, sm, cm, "round %d call %d: %s", round, call, pair[0])
			}
			for _, pair := range [][2]string{{ck.remaining, sk.remaining}, {ck.held, sk.held}} {
				cv, err := c.Do(ctx, c.B().Get().Key(pair[0]).Build()).ToString()
				require.NoError(t, err)
				sv, err := c.Do(ctx, c.B().Get().Key(pair[1]).Build()).ToString()
				require.NoError(t, err)
				require.Equal(t, sv, cv, "round %d call %d: %s", round, call, pair[0])
			}
			// And the state is right, not only alike: the held orders
			// and their customers' counts, the held count and the stock
			// agree, and no customer holds more than the limit.
			st, err := g.Inspect(ctx, combined.Code)
			require.NoError(t, err)
			users := map[string]int32{}
			for _, h := range st.Orders {
				if !h.Released {
					users[h.CustomerID]++
				}
			}
			held := 0
			for cust, n := range users {
				require.LessOrEqual(t, n, int32(2), "customer %s", cust)
				require.Equal(t, n, st.Users[cust], "round %d call %d: customer %s", round, call, cust)
				held += int(n)
			}
			for cust, n := range st.Users {
				require.Equal(t, users[cust], n, "round %d call %d: customer %s", round, call, cust)
			}
			require.True(t, st.HeldCounted)
			require.EqualValues(t, held, st.HeldCount)
			require.EqualValues(t, 9-held, st.Remaining)
			// Give some uses back on both, so that later calls find
			// released orderIds and customers below their limit.
			for i := range 14 {
				if rng.IntN(4) > 0 {
					continue
				}
				id := "mix-" + strconv.Itoa(i)
				mode := voucher.ReleaseMark
				if rng.IntN(2) == 0 {
					mode = voucher.ReleaseForget
				}
				cr, err := g.Release(ctx, combined.Code, id, mode)
				require.NoError(t, err)
				sr, err := g.Release(ctx, single.Code, id, mode)
				require.NoError(t, err)
				require.Equal(t, sr, cr, "release of %s", id)
			}
		}
	}
}

// TestConcurrentTakesCombined: takes of one voucher from many goroutines at
// once, combined into shared script calls, hand out exactly the voucher's
// uses, each orderId answered once with its own decision, and the gate's
// counts agree with the orders.
func TestConcurrentTakesCombined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewRedis(t)
	cc := newCommandCounter(t, srv.Addr)
	g := newGate(t, Config{SoldOutTTL: -1, Timeout: 10 * time.Second, CombineTakes: true}, srv.Addr)
	const total, callers = 150, 400
	v := testVoucher("COMBINE", total, 1)
	loadEmpty(t, g, v)
	outcomes := make([]voucher.GateOutcome, callers)
	calls := cc.during(t, func() {
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				// Every fourth caller asks again for the orderId before it.
				id := i
				if i%4 == 3 {
					id = i - 1
				}
				d, err := g.Reserve(ctx, v.Code, 1, testHold("c-"+strconv.Itoa(id), int64(id+1)))
				require.NoError(t, err)
				outcomes[i] = d.Outcome
			})
		}
		wg.Wait()
	})
	t.Logf("%d takes in %d script calls", callers, calls["evalsha"]+calls["eval"])
	taken := 0
	for i, o := range outcomes {
		if o == voucher.GateTaken {
			taken++
		}
		switch i % 4 {
		case 0, 1:
			require.Contains(t, []voucher.GateOutcome{voucher.GateTaken, voucher.GateSoldOut}, o, "caller %d", i)
		case 2:
			// The two asks of one orderId, in either order: one takes
			// and the other replays, or both find no use left.
			pair := []voucher.GateOutcome{o, outcomes[i+1]}
			require.True(t, slices.Equal(pair, []voucher.GateOutcome{voucher.GateSoldOut, voucher.GateSoldOut}) ||
				slices.Contains(pair, voucher.GateTaken) && slices.Contains(pair, voucher.GateReplay), "callers %d and %d: %v", i, i+1, pair)
		}
	}
	require.Equal(t, total, taken)
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 0, st.Remaining)
	require.Len(t, st.Orders, total)
	require.True(t, st.HeldCounted)
	require.EqualValues(t, total, st.HeldCount)
	require.Len(t, st.Users, total)
}

// TestAbandonedTakeNeverSent: a combined take whose caller stopped waiting
// before its call was made is left out of the call: it takes nothing, so
// its caller's plain 503 is true.
func TestAbandonedTakeNeverSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1, CombineTakes: true})
	v := testVoucher("ABANDON", 5, 1)
	loadEmpty(t, g, v)
	gone, kept := queuedTake(1, testHold("gone", 1)), queuedTake(1, testHold("kept", 2))
	gone.abandoned = true
	tq := &takeQueue{waiting: []*takeReq{gone, kept}}
	g.takes.mu.Lock()
	g.takes.queues = map[string]*takeQueue{v.Code: tq}
	g.takes.mu.Unlock()
	g.runTakes(v.Code, tq)

	<-gone.done
	<-kept.done
	require.False(t, gone.sent)
	require.NoError(t, kept.err)
	require.Equal(t, voucher.GateTaken, kept.dec.Outcome)
	_, found, err := g.Lookup(ctx, v.Code, "gone")
	require.NoError(t, err)
	require.False(t, found, "the abandoned take was not made")
	g.takes.mu.Lock()
	require.Empty(t, g.takes.queues, "the queue is dropped once empty")
	g.takes.mu.Unlock()

	// A caller whose wait ends before its take is sent answers a plain
	// CodeUnavailable: not ErrGateUnanswered.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = g.Reserve(cctx, v.Code, 1, testHold("late", 3))
	if err != nil {
		require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "%v", err)
		_, found, lerr := g.Lookup(ctx, v.Code, "late")
		require.NoError(t, lerr)
		if !errors.Is(err, voucher.ErrGateUnanswered) {
			require.False(t, found, "a plain 503 took nothing")
		}
	}
}
