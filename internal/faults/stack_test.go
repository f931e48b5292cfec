package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// stackModes are the write modes the stack scenario runs in: every mode.
var stackModes = []string{modeStandard, modeSync, modeKafka}

// stackHotCodes is how many codes a stack scenario sells; every order of
// several codes presents two or three of them, so that they are all hot.
const stackHotCodes = 3

// runStackScenario is a flash sale of stackHotCodes stackable codes
// (flash-sale vouchers outside standard mode), orders of two or three of
// them and single reservations of one mixed, under kills and restarts of
// the instances and the dependencies (hangs of Redis and PostgreSQL
// included, each followed by a check that no use of any code is stranded:
// checkStranded); CheckStacks checks all or none per
// orderId in PostgreSQL and Redis, no oversell per code, and the counters
// against the rows. The per-code linearizability models are not run on
// it (docs/stacks.md, why the per-code models suffice).
func runStackScenario(t *testing.T, sc scenario) {
	began := time.Now()
	rnd := rand.New(rand.NewPCG(sc.seed, 0x737461636b))
	defer func() {
		if t.Failed() {
			t.Logf("REPLAY: VOUCHERD_FAULTS_SEED=%d VOUCHERD_FAULTS_MODES=%s go test ./internal/faults -run 'TestFaults/%s'",
				sc.seed, sc.mode, sc.path())
		}
	}()
	flash := sc.mode != modeStandard
	c := newCluster(t, sc.mode, 2, sc.serveEnv)
	var codes []string
	limits := 0
	for i := 0; i < stackHotCodes; i++ {
		spec := VoucherSpec{Code: fmt.Sprintf("K%s%d-%c", strings.ToUpper(sc.mode[:1]), sc.seed, 'A'+i), TotalLimit: 15 + rnd.IntN(16), PerUserLimit: 2}
		c.createVoucher(spec, flash, map[string]any{"stacking": map[string]any{"stackable": true}})
		codes = append(codes, spec.Code)
		limits += spec.TotalLimit
	}
	customers := limits/4 + 5 + rnd.IntN(10)

	hist := NewHistory()
	w := &workload{
		spec: VoucherSpec{Code: codes[0]}, hist: hist, addrs: c.addrs, clients: 8, customers: customers,
		attemptTimeout: 800 * time.Millisecond, shortTimeouts: 0.03, giveUp503: 0.2, seed: sc.seed,
	}
	var schedules [][]fault
	switch {
	case sc.kinds != nil && len(sc.kinds) == 0:
	case sc.kinds != nil:
		schedules = append(schedules, plan(rnd, sc.kinds, true, 0, len(c.instances)))
	default:
		kinds := map[string][]string{
			modeStandard: {faultKillInstance, faultKillPostgres, faultPauseInstance, faultHangPostgres},
			modeSync:     {faultKillRedis, faultPauseInstance, faultKillInstance, faultImmediatePostgres, faultHangRedis, faultHangPostgres},
			modeKafka:    {faultKillKafka, faultKillConsumer, faultKillRedis, faultPauseInstance, faultKillInstance},
		}[sc.mode]
		rnd.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		// Hangs first, so that no process fault's holds overlap their
		// stranded checks (checkStranded, of every code).
		slices.SortStableFunc(kinds, func(a, b string) int {
			return cmpBool(strings.HasPrefix(b, "hang-"), strings.HasPrefix(a, "hang-"))
		})
		schedules = append(schedules, plan(rnd, kinds, true, 0, len(c.instances)))
	}

	soft, stopWorkload := context.WithCancel(context.Background())
	defer stopWorkload()
	var workWG sync.WaitGroup
	w.hard.Store(time.Now().Add(10 * time.Minute).UnixNano())
	transport := newTransport()
	defer transport.CloseIdleConnections()
	for i := 0; i < w.clients; i++ {
		workWG.Add(1)
		go func() {
			defer workWG.Done()
			cl := &client{id: i, hc: &http.Client{Transport: transport}, hist: hist, addrs: c.addrs, next: i}
			stackClient(soft, w, codes, i, cl, rand.New(rand.NewPCG(sc.seed, uint64(i))))
		}()
	}

	time.Sleep(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nem := &nemesis{c: c, hist: hist, code: codes[0], codes: codes}
	var nemWG sync.WaitGroup
	for _, sch := range schedules {
		nemWG.Add(1)
		go func() { defer nemWG.Done(); nem.run(ctx, sch) }()
	}
	nemWG.Wait()
	if err := c.heal(t); err != nil {
		t.Errorf("heal after the faults: %v", err)
	}
	time.Sleep(3 * time.Second)
	w.hard.Store(time.Now().Add(45 * time.Second).UnixNano())
	stopWorkload()
	workWG.Wait()
	ops := hist.Ops()

	st := StackState{Codes: map[string]DBState{}}
	if flash {
		st.Gates = map[string]GateState{}
		// A killed consumer's group waits for its session to time out
		// before the partitions are served again (as in runScenario).
		// Until then a Kafka-mode instance refuses to load a voucher Redis
		// lost (the consumer is behind), and a warm-up that waited for
		// another loader in vain answers "not in the gate": the warm-up is
		// tried again, a second apart, until the consumer is back.
		settleTimeout, tries := 30*time.Second, 3
		if sc.mode == modeKafka {
			settleTimeout, tries = 150*time.Second, 150
		}
		for _, code := range codes {
			var rep reconcileReport
			var err error
			for try := 0; try < tries; try++ {
				_, rep, err = c.reconcile(code, settleTimeout)
				if err == nil || rep.Loaded {
					break
				}
				if try >= 3 {
					time.Sleep(time.Second)
				}
				if werr := c.warmup(code, 30*time.Second); werr != nil {
					t.Logf("warm-up of %s after the faults: %v", code, werr)
				}
			}
			if err != nil {
				t.Errorf("code %s: Redis and PostgreSQL did not agree after the faults: %v (last report %+v)", code, err, rep)
			}
		}
	}
	for _, code := range codes {
		st.Codes[code] = c.dbState(code)
		if flash {
			st.Gates[code] = c.gateState(code)
		}
	}
	st.Stacks, st.Members = c.stackRows()

	problems := CheckStacks(ops, st, flash)
	problems = append(problems, CheckReplays(ops)...)
	stranded, strandChecks := nem.strandedUses()
	problems = append(problems, stranded...)
	if len(strandChecks) > 0 {
		t.Logf("no use stranded %s after each hang: %s", strandCheckAfter, strings.Join(strandChecks, "; "))
	}
	if n := w.unresolved.Load(); n > 0 {
		problems = append(problems, fmt.Sprintf("%d operations got no definite answer within 45s after the faults ended", n))
	}
	var unexpected []string
	for _, op := range ops {
		switch op.Outcome {
		case OK, Unknown, Unavailable, NotSent, OutOfStock, AlreadyUsed, OrderConflict, OrderReleased, NotFound, ReservationReleased:
		default:
			unexpected = append(unexpected, op.String())
		}
	}
	if len(unexpected) > 0 {
		problems = append(problems, fmt.Sprintf("%d unexpected answers, first: %s", len(unexpected), unexpected[0]))
	}
	var faultList []string
	for _, f := range nem.faults() {
		faultList = append(faultList, f.String())
		if f.Err != "" {
			problems = append(problems, "fault "+f.String())
		}
	}
	stacksHeld, held := 0, make([]string, 0, len(codes))
	for _, code := range codes {
		db := st.Codes[code]
		held = append(held, fmt.Sprintf("%s %d/%d", code, heldCount(db), db.TotalLimit))
	}
	for id, s := range st.Stacks {
		if r, ok := st.Codes[s.Codes[0]].Rows[id]; ok && r.Held() {
			stacksHeld++
		}
	}
	t.Logf("mode=%s seed=%d stack scenario, customers=%d, took %s\n  faults: %s\n  attempts: %d (%s)\n  final: held %s; %d stacks recorded, %d held\n  problems: %d",
		sc.mode, sc.seed, customers, time.Since(began).Round(100*time.Millisecond), strings.Join(faultList, ", "),
		len(ops), Summary(ops), strings.Join(held, ", "), len(st.Stacks), stacksHeld, len(problems))
	for i, p := range problems {
		if i == 20 {
			t.Errorf("… and %d more problems", len(problems)-i)
			break
		}
		t.Errorf("%s", p)
	}
}

// stackClient is one client of the stack scenario: new orders of two or
// three of codes (in a random order) or of one, releases and confirms of
// its orders, another customer's orderId (ORDER_CONFLICT) and late
// retries of its own. Every operation goes through w.do: retried with
// the same orderId until a definite answer.
func stackClient(soft context.Context, w *workload, codes []string, id int, c *client, rnd *rand.Rand) {
	type order struct {
		id, what string
		cust     int64
	}
	var held, mine []order
	n := 0
	rushUntil := time.Now().Add(1500 * time.Millisecond)
	for soft.Err() == nil {
		if time.Now().After(rushUntil) {
			time.Sleep(time.Duration(rnd.Int64N(int64(15*time.Millisecond) + 1)))
		}
		switch r := rnd.IntN(100); {
		case r < 55 || len(held) == 0:
			n++
			o := order{cust: 1 + rnd.Int64N(int64(w.customers))}
			if r < 35 {
				pick := slices.Clone(codes)
				rnd.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
				o.id, o.what = fmt.Sprintf("K-c%d-%d", id, n), strings.Join(pick[:2+rnd.IntN(len(pick)-1)], stackSep)
			} else {
				o.id, o.what = fmt.Sprintf("S-c%d-%d", id, n), codes[rnd.IntN(len(codes))]
			}
			if w.do(c, rnd, Op{Kind: Reserve, Voucher: o.what, Customer: customerName(o.cust), OrderID: o.id}) == OK {
				held = append(held, o)
				mine = append(mine, o)
			}
		case r < 72:
			k := rnd.IntN(len(held))
			o := held[k]
			if w.do(c, rnd, Op{Kind: Release, Voucher: o.what, OrderID: o.id}).Definite() {
				held = append(held[:k], held[k+1:]...)
			}
		case r < 82:
			o := held[rnd.IntN(len(held))]
			w.do(c, rnd, Op{Kind: Confirm, Voucher: o.what, OrderID: o.id})
		case r < 90:
			o := mine[rnd.IntN(len(mine))]
			other := 1 + (o.cust+rnd.Int64N(int64(w.customers-1)))%int64(w.customers)
			w.do(c, rnd, Op{Kind: Reserve, Voucher: o.what, Customer: customerName(other), OrderID: o.id})
		default:
			o := mine[rnd.IntN(len(mine))]
			w.do(c, rnd, Op{Kind: Reserve, Voucher: o.what, Customer: customerName(o.cust), OrderID: o.id})
		}
	}
}

// stackRows reads the stacks and their members from PostgreSQL.
func (c *cluster) stackRows() (map[string]StackRow, map[string]string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dbURL)
	require.NoError(c.t, err)
	defer conn.Close(context.Background())
	stacks := map[string]StackRow{}
	rows, err := conn.Query(ctx, `SELECT order_id, customer, codes FROM voucher_stack`)
	require.NoError(c.t, err)
	for rows.Next() {
		var id string
		var s StackRow
		require.NoError(c.t, rows.Scan(&id, &s.Customer, &s.Codes))
		stacks[id] = s
	}
	require.NoError(c.t, rows.Err())
	members := map[string]string{}
	rows, err = conn.Query(ctx, `SELECT member_order_id, order_id FROM voucher_stack_member`)
	require.NoError(c.t, err)
	for rows.Next() {
		var m, id string
		require.NoError(c.t, rows.Scan(&m, &id))
		members[m] = id
	}
	require.NoError(c.t, rows.Err())
	return stacks, members
}
