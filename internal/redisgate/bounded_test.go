package redisgate

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
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

// TestGateCallsBoundedAtSize: with a flash voucher of 200,000 orders,
// every command the gate sends while it loads the voucher (in steps),
// inspects it, counts and clamps it, repairs and re-checks single orders,
// releases one as the expiry does, and copies its orders for the sold-out
// cache does work bounded by ScanCount, not by the voucher: Redis's
// MONITOR shows each command with the commands its script ran, and the
// work of one call (the arguments it handles, a scan's COUNT) stays under
// maxCallWork, which a read of the whole voucher exceeds 60 times over. It
// measures work, not time, so it holds on a loaded machine;
// TestReconcileCommandsShortAtSize checks the time in SLOWLOG.
func TestGateCallsBoundedAtSize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200,000 holds")
	}
	t.Parallel()
	ctx := context.Background()
	const n, scan = 200_000, 500
	srv := testenv.NewRedis(t) // MONITOR sees the whole server: a Redis of its own
	g := newGate(t, Config{ScanCount: scan, SoldOutMaxOrders: n + 10, SoldOutTTL: time.Hour}, srv.Addr)
	c := rawClient(t, g)
	mon := startMonitor(t, srv.Addr, scan)

	// Warm-up: a snapshot of n orders, a tenth released; remaining 1.
	snap := bigSnapshot("BIGBOUND", n)
	wrote, err := g.Load(ctx, snap)
	require.NoError(t, err)
	require.True(t, wrote)
	code := snap.Voucher.Code
	k := keysFor(g.cfg.KeyPrefix, code)

	// A voucher loaded before the held count existed, 17 uses too many.
	require.NoError(t, c.Do(ctx, c.B().Del().Key(k.held).Build()).Error())
	require.NoError(t, c.Do(ctx, c.B().Set().Key(k.remaining).Value("18").Build()).Error())
	st, err := g.Inspect(ctx, code)
	require.NoError(t, err)
	require.Len(t, st.Orders, n)
	require.False(t, st.HeldCounted)
	before, after, err := g.Clamp(ctx, code, snap.Voucher.TotalLimit)
	require.NoError(t, err)
	require.EqualValues(t, 18, before)
	require.EqualValues(t, 1, after, "the clamp counts the holds in chunks and lowers the 17 too many")

	// Single repairs and the expiry's release.
	adopted, err := g.Adopt(ctx, code, testHold("adopted", 70_001))
	require.NoError(t, err)
	require.True(t, adopted)
	released, err := g.Release(ctx, code, orderID(1), voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	_, err = g.Confirm(ctx, code, orderID(2), "")
	require.NoError(t, err)
	_, err = g.Release(ctx, code, "adopted", voucher.ReleaseForget)
	require.NoError(t, err)
	// A pass's re-check of a missing hold, and its drift's counts.
	_, found, err := g.Lookup(ctx, code, orderID(3))
	require.NoError(t, err)
	require.True(t, found)
	counts, err := g.Counts(ctx, code)
	require.NoError(t, err)
	require.True(t, counts.HeldCounted)
	_, err = g.Extend(ctx, code, orderID(3), time.Now().Add(20*time.Minute))
	require.NoError(t, err)
	// A pass's compare: the orders in chunks, a chunk of rows' orderIds
	// looked up, the limit counters.
	walked := 0
	for cursor, first := uint64(0), true; first || cursor != 0; first = false {
		var holds []voucher.Hold
		holds, cursor, err = g.ScanOrders(ctx, code, cursor)
		require.NoError(t, err)
		walked += len(holds)
	}
	require.GreaterOrEqual(t, walked, n, "every order is walked")
	ids := make([]string, scan)
	for i := range ids {
		ids[i] = orderID(i + 3)
	}
	known, err := g.Known(ctx, code, ids)
	require.NoError(t, err)
	require.Equal(t, voucher.GateOrderHolding, known[0])
	_, err = g.LimitCounts(ctx, code)
	require.NoError(t, err)

	// The last uses (two were given back): the sold-out answer starts a
	// copy of the orders.
	for i, want := range []voucher.GateOutcome{voucher.GateTaken, voucher.GateTaken, voucher.GateSoldOut} {
		d, err := g.Reserve(ctx, code, snap.Voucher.PerUserLimit, testHold("last-"+strconv.Itoa(i), int64(70_002+i)))
		require.NoError(t, err)
		require.Equal(t, want, d.Outcome, "reservation %d", i)
	}
	require.Eventually(t, func() bool { return g.soldOut.copies.Load() == 1 }, time.Minute, 10*time.Millisecond,
		"the sold-out cache copies the orders")
	st, err = g.Inspect(ctx, code)
	require.NoError(t, err)
	require.True(t, st.HeldCounted)
	require.Equal(t, st.Held(), st.HeldCount, "the count is exact")

	calls := mon.stop(t, c)
	t.Logf("per kind of call: calls, the most work in one, all work, script commands")
	for _, kind := range calls.kinds() {
		s := calls.byKind[kind]
		t.Logf("  %-18s %7d %7d %10d %10d", kind, s.calls, s.maxWork, s.work, s.luaCommands)
	}
	require.Empty(t, calls.violations, "every call does work bounded by ScanCount")
	// The voucher was handled in chunks, each call doing at most its share.
	for kind, least := range map[string]int{
		"script loadstep": n / scan, "script heldinit": n / scan / 2, "HSCAN": 3 * n / scan,
	} {
		require.GreaterOrEqual(t, calls.byKind[kind].calls, least, "%s in chunks", kind)
	}
	for _, kind := range []string{"script reserve", "script release", "script adopt", "script clamp", "script counts",
		"script confirm", "script lookup", "script extend"} {
		require.Positive(t, calls.byKind[kind].calls, "%s was seen", kind)
		require.Positive(t, calls.byKind[kind].luaCommands, "%s's commands were seen", kind)
	}
	require.GreaterOrEqual(t, calls.byKind["HMGET"].maxWork, scan, "a chunk of orderIds looked up in one HMGET")
}

// TestCallWork: the measure of TestGateCallsBoundedAtSize refuses what
// reads or frees a whole voucher in one call.
func TestCallWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		work int
		bad  bool
	}{
		{[]string{"HGETALL", "p:voucher:{A}:orders"}, 0, true},
		{[]string{"SMEMBERS", "p:voucher:{A}:heldscan"}, 0, true},
		{[]string{"DEL", "p:voucher:{A}:loading", "p:voucher:{A}:orders"}, 0, true},
		{[]string{"HSCAN", "p:voucher:{A}:orders", "0", "COUNT", "600"}, 600, true},
		{[]string{"HSCAN", "p:voucher:{A}:orders", "0", "COUNT", "500"}, 500, false},
		{[]string{"HSCAN", "p:voucher:{A}:orders", "0"}, 10, false},
		{[]string{"UNLINK", "p:voucher:{A}:orders", "p:voucher:{A}:users"}, 2, false},
		{[]string{"DEL", "p:voucher:{A}:loading"}, 1, false},
		{[]string{"GET", "p:voucher:{A}:remaining"}, 1, false},
		{[]string{"HSET", "h", "a", "1", "b", "2"}, 4, false},
	} {
		w, why := callWork(tc.args, 500)
		require.Equal(t, tc.bad, why != "", "%q: %s", tc.args, why)
		if !tc.bad {
			require.Equal(t, tc.work, w, "%q", tc.args)
		}
	}
}

// bigSnapshot is a voucher's snapshot of n orders of 50,000 customers, a
// tenth of them released, with one use left.
func bigSnapshot(code string, n int) voucher.Snapshot {
	at := time.Now().UTC().Truncate(time.Millisecond)
	snap := voucher.Snapshot{Customers: map[string]int32{}, Orders: make([]voucher.Redemption, 0, n)}
	for i := range n {
		st := voucher.StatusReserved
		if i%10 == 0 {
			st = voucher.StatusReleased
		}
		cust := strconv.Itoa(i % 50_000)
		snap.Orders = append(snap.Orders, voucher.Redemption{OrderID: orderID(i), VoucherCode: code, CustomerID: cust,
			OrderAmount: 250000, DiscountAmount: 100000, Status: st, CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(15 * time.Minute)})
		if st.Held() {
			snap.Customers[cust]++
			snap.Held++
		}
	}
	snap.Voucher = testVoucher(code, snap.Held+1, 5)
	return snap
}

// maxCallWork is the most work one call may do with a chunk of scan
// entries: a load step's part (its arguments, then the same pairs written)
// and a count's chunk (the scan, then the orderIds checked and added) do a
// few times scan; a call on one order a few dozen.
func maxCallWork(scan int) int { return 6*scan + 100 }

// wholeKeyCommands read or change a whole key in one call.
var wholeKeyCommands = map[string]bool{
	"HGETALL": true, "HKEYS": true, "HVALS": true, "SMEMBERS": true, "KEYS": true, "SORT": true,
	"SINTER": true, "SUNION": true, "SDIFF": true, "SINTERSTORE": true, "SUNIONSTORE": true, "SDIFFSTORE": true,
	"LRANGE": true, "ZRANGE": true, "FLUSHDB": true, "FLUSHALL": true, "DUMP": true, "COPY": true,
}

// bigKeySuffixes name a voucher's keys that grow with its orders or
// customers: DEL of one frees it in the call (UNLINK in the background).
var bigKeySuffixes = []string{":orders", ":users", ":codes", ":heldscan", ":freed", ":void",
	":loadorders", ":loadusers", ":loadcodes"}

// callWork is the work of one command: a scan's COUNT (10 without one),
// the keys of a command on keys, else the arguments after the key (at
// least 1). why is set for a command
// whose work grows with a key instead: one that reads or changes a whole
// key, DEL of a key that grows with the voucher, a scan of more than scan.
func callWork(args []string, scan int) (work int, why string) {
	name := strings.ToUpper(args[0])
	switch {
	case wholeKeyCommands[name]:
		return 0, "reads or changes a whole key"
	case name == "DEL":
		for _, key := range args[1:] {
			for _, s := range bigKeySuffixes {
				if strings.HasSuffix(key, s) {
					return 0, "DEL of a key that grows with the voucher (UNLINK frees it in the background)"
				}
			}
		}
		return len(args) - 1, ""
	case name == "UNLINK" || name == "EXISTS" || name == "MGET" || name == "TOUCH":
		return len(args) - 1, ""
	case name == "HSCAN" || name == "SSCAN" || name == "ZSCAN" || name == "SCAN":
		count := 10
		for i := 2; i+1 < len(args); i++ {
			if strings.EqualFold(args[i], "COUNT") {
				count, _ = strconv.Atoi(args[i+1])
			}
		}
		if count > scan {
			return count, "scans more than ScanCount"
		}
		return count, ""
	}
	return max(1, len(args)-2), ""
}

// monitor reads a Redis server's MONITOR and sums, per call (a command a
// client sent, with the commands its script ran), the work it did.
type monitor struct {
	conn   net.Conn
	scan   int
	marker string
	done   chan struct{}

	mu       sync.Mutex
	luaFirst bool     // this server shows a script's commands before its EVALSHA
	cur      *monCall // the call whose script commands are being read
	pending  monCall  // luaFirst: script commands waiting for their call
	res      monResult
	err      error
}

type monCall struct {
	kind     string
	work     int
	luaCmds  int
	why      []string
	isScript bool
}

// monResult is what the monitor saw.
type monResult struct {
	byKind     map[string]*kindStats
	violations []string
}

type kindStats struct{ calls, maxWork, work, luaCommands int }

func (r monResult) kinds() []string {
	var ks []string
	for k := range r.byKind {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// startMonitor connects to addr, starts MONITOR and learns on which side
// of its EVAL this server shows a script's commands.
func startMonitor(t *testing.T, addr string, scan int) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	var b [8]byte
	_, err = rand.Read(b[:])
	require.NoError(t, err)
	m := &monitor{conn: conn, scan: scan, marker: "monitor-end-" + hex.EncodeToString(b[:]), done: make(chan struct{}),
		res: monResult{byKind: map[string]*kindStats{}}}
	_, err = conn.Write([]byte("*1\r\n$7\r\nMONITOR\r\n"))
	require.NoError(t, err)
	r := bufio.NewReaderSize(conn, 1<<20)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", line)

	// Calibration: which comes first, the EVAL or the command it runs?
	cal, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	defer cal.Close()
	probe := m.marker + "-probe"
	require.NoError(t, cal.Do(context.Background(), cal.B().Eval().Script("return redis.call('EXISTS', KEYS[1])").
		Numkeys(1).Key(probe).Build()).Error())
	var evalAt, probeAt int
	for i := 1; evalAt == 0 || probeAt == 0; i++ {
		require.Less(t, i, 1000, "the probe shows in MONITOR")
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		lua, args := parseMonitorLine(line)
		switch {
		case len(args) > 0 && strings.EqualFold(args[0], "EVAL"):
			evalAt = i
		case lua && len(args) == 2 && args[1] == probe:
			probeAt = i
		}
	}
	m.luaFirst = probeAt < evalAt
	go m.read(r)
	return m
}

func (m *monitor) read(r *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			return
		}
		lua, args := parseMonitorLine(line)
		if len(args) == 0 {
			continue
		}
		if !lua && len(args) == 2 && strings.EqualFold(args[0], "EXISTS") && args[1] == m.marker {
			m.mu.Lock()
			m.finish()
			m.mu.Unlock()
			return
		}
		m.mu.Lock()
		m.add(lua, args)
		m.mu.Unlock()
	}
}

// add counts one command: a client's starts a call (after closing the one
// before), a script's adds to its call.
func (m *monitor) add(lua bool, args []string) {
	w, why := callWork(args, m.scan)
	if lua {
		target := m.cur
		if m.luaFirst {
			target = &m.pending
		}
		if target == nil {
			m.res.violations = append(m.res.violations, "a script's command without its call: "+strings.Join(args[:min(len(args), 2)], " "))
			return
		}
		target.work += w
		target.luaCmds++
		if why != "" {
			target.why = append(target.why, args[0]+": "+why)
		}
		return
	}
	m.finish()
	call := monCall{kind: strings.ToUpper(args[0]), work: w}
	if why != "" {
		call.why = append(call.why, why)
	}
	if (call.kind == "EVALSHA" || call.kind == "EVAL") && len(args) > 1 {
		call.isScript = true
		// EVALSHA, or EVAL after NOSCRIPT: the same script.
		call.kind = "script " + ScriptName(args[1])
	}
	if m.luaFirst && call.isScript {
		call.work += m.pending.work
		call.luaCmds = m.pending.luaCmds
		call.why = append(call.why, m.pending.why...)
	}
	m.pending = monCall{}
	m.cur = &call
}

// finish records the call being read.
func (m *monitor) finish() {
	if m.cur == nil {
		return
	}
	c := m.cur
	m.cur = nil
	s := m.res.byKind[c.kind]
	if s == nil {
		s = &kindStats{}
		m.res.byKind[c.kind] = s
	}
	s.calls++
	s.work += c.work
	s.maxWork = max(s.maxWork, c.work)
	s.luaCommands += c.luaCmds
	if c.work > maxCallWork(m.scan) {
		c.why = append(c.why, "work "+strconv.Itoa(c.work)+" over "+strconv.Itoa(maxCallWork(m.scan)))
	}
	for _, why := range c.why {
		m.res.violations = append(m.res.violations, c.kind+": "+why)
	}
}

// stop sends the end marker through c, waits until the monitor read
// everything before it, and returns what it saw.
func (m *monitor) stop(t *testing.T, c rueidis.Client) monResult {
	t.Helper()
	require.NoError(t, c.Do(context.Background(), c.B().Exists().Key(m.marker).Build()).Error())
	select {
	case <-m.done:
	case <-time.After(time.Minute):
		t.Fatal("the monitor did not see its end marker")
	}
	m.conn.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	require.NoError(t, m.err)
	return m.res
}

// parseMonitorLine splits a MONITOR line (+<time> [<db> <client>] "arg" ...)
// into whether a script ran the command and its unquoted arguments.
func parseMonitorLine(line string) (lua bool, args []string) {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "+"), "\r\n")
	open, end := strings.IndexByte(line, '['), strings.IndexByte(line, ']')
	if open < 0 || end < open {
		return false, nil
	}
	lua = strings.HasSuffix(line[open+1:end], " lua")
	rest := line[end+1:]
	for i := 0; i < len(rest); i++ {
		if rest[i] != '"' {
			continue
		}
		var b strings.Builder
		for i++; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] != '\\' || i+1 >= len(rest) {
				b.WriteByte(rest[i])
				continue
			}
			i++
			switch rest[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 < len(rest) {
					if v, err := strconv.ParseUint(rest[i+1:i+3], 16, 8); err == nil {
						b.WriteByte(byte(v))
						i += 2
						continue
					}
				}
				b.WriteByte('x')
			default:
				b.WriteByte(rest[i])
			}
		}
		args = append(args, b.String())
	}
	return lua, args
}
