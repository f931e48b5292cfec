package faults

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// seq builds a sequential history: each op returns before the next starts.
// An op that names no voucher is on "V".
func seq(ops ...Op) []Op {
	for i := range ops {
		ops[i].ID = i
		if ops[i].Voucher == "" {
			ops[i].Voucher = "V"
		}
		ops[i].Call = int64(10 * i)
		ops[i].Return = int64(10*i + 5)
	}
	return ops
}

func res(cust int64, order string, out Outcome) Op {
	return Op{Kind: Reserve, Customer: strconv.FormatInt(cust, 10), OrderID: order, Outcome: out}
}

func rel(order string, out Outcome) Op { return Op{Kind: Release, OrderID: order, Outcome: out} }

func conf(order string, out Outcome) Op { return Op{Kind: Confirm, OrderID: order, Outcome: out} }

// repl is a reservation of order that replaces the order replaces.
func repl(cust int64, order, replaces string, out Outcome) Op {
	op := res(cust, order, out)
	op.Replaces = replaces
	return op
}

// resK is a reservation presenting campaign code code; relK and confK
// release and confirm through it.
func resK(cust int64, order, code string, out Outcome) Op {
	op := res(cust, order, out)
	op.Voucher = code
	return op
}

func relK(order, code string, out Outcome) Op {
	op := rel(order, out)
	op.Voucher = code
	return op
}

func confK(order, code string, out Outcome) Op {
	op := conf(order, out)
	op.Voucher = code
	return op
}

func TestModelRules(t *testing.T) {
	t.Parallel()
	spec := VoucherSpec{Code: "V", TotalLimit: 2, PerUserLimit: 1}
	tests := []struct {
		name   string
		strict bool
		ops    []Op
		want   porcupine.CheckResult
	}{
		{"take until sold out", true, seq(res(1, "a", OK), res(2, "b", OK), res(3, "c", OutOfStock)), porcupine.Ok},
		{"oversell", false, seq(res(1, "a", OK), res(2, "b", OK), res(3, "c", OK)), porcupine.Illegal},
		{"quota", true, seq(res(1, "a", OK), res(1, "b", AlreadyUsed)), porcupine.Ok},
		{"quota broken", false, seq(res(1, "a", OK), res(1, "b", OK)), porcupine.Illegal},
		{"replay takes nothing", true, seq(res(1, "a", OK), res(1, "a", OK), res(2, "b", OK), res(3, "c", OutOfStock)), porcupine.Ok},
		{"retry took a second use", false, seq(res(1, "a", OK), res(1, "a", OK), res(2, "b", OK), res(3, "c", OK)), porcupine.Illegal},
		{"conflict", true, seq(res(1, "a", OK), res(2, "a", OrderConflict)), porcupine.Ok},
		{"conflict missed", false, seq(res(1, "a", OK), res(2, "a", OK)), porcupine.Illegal},
		{"release gives back", true, seq(res(1, "a", OK), res(2, "b", OK), rel("a", OK), res(3, "c", OK), res(4, "d", OutOfStock)), porcupine.Ok},
		{"release twice gives back once", false, seq(res(1, "a", OK), res(2, "b", OK), rel("a", OK), rel("a", OK), res(3, "c", OK), res(4, "d", OK)), porcupine.Illegal},
		{"released order stays released", true, seq(res(1, "a", OK), rel("a", OK), res(1, "a", OrderReleased)), porcupine.Ok},
		{"released order taken again", false, seq(res(1, "a", OK), rel("a", OK), res(1, "a", OK)), porcupine.Illegal},
		{"release of unknown order", true, seq(rel("a", NotFound)), porcupine.Ok},
		{"release of held order not found", false, seq(res(1, "a", OK), rel("a", NotFound)), porcupine.Illegal},
		{"confirm", true, seq(res(1, "a", OK), conf("a", OK), conf("a", OK), rel("a", OK), conf("a", ReservationReleased)), porcupine.Ok},
		{"strict refuses undersell", true, seq(res(1, "a", OutOfStock)), porcupine.Illegal},
		{"relaxed allows undersell", false, seq(res(1, "a", OutOfStock), res(2, "b", AlreadyUsed)), porcupine.Ok},
		{"503 takes nothing", true, seq(res(1, "a", Unavailable), res(2, "b", OK), res(3, "c", OK)), porcupine.Ok},
		{"both limits bind: either refusal", true, seq(res(1, "a", OK), res(2, "b", OK), res(1, "c", OutOfStock), res(1, "d", AlreadyUsed)), porcupine.Ok},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := CheckLinearizable(spec, tc.strict, tc.ops, nil, 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, tc.want, r.Result, r.Explain)
			if tc.want == porcupine.Illegal {
				require.Contains(t, r.Explain, "cannot be placed")
			}
		})
	}
}

// TestUnknownIsOpenEnded: an attempt that timed out may have taken effect
// at any moment after its call, or never.
func TestUnknownIsOpenEnded(t *testing.T) {
	t.Parallel()
	spec := VoucherSpec{Code: "V", TotalLimit: 1, PerUserLimit: 1}

	// It took the last use: a later reservation is refused.
	ops := seq(res(1, "a", Unknown), res(2, "b", OutOfStock))
	r, err := CheckLinearizable(spec, true, ops, nil, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, r.Result)
	require.Equal(t, 1, r.Unknown)

	// It never took effect: a later reservation gets the use.
	ops = seq(res(1, "a", Unknown), res(2, "b", OK))
	r, err = CheckLinearizable(spec, true, ops, nil, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, r.Result)

	// It took effect late, after b was released: its retry is a replay.
	ops = seq(res(1, "a", Unknown), res(2, "b", OK), rel("b", OK), res(1, "a", OK), res(3, "c", OutOfStock))
	r, err = CheckLinearizable(spec, true, ops, nil, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, r.Result)

	// But it cannot explain two uses held at once.
	ops = seq(res(1, "a", Unknown), res(2, "b", OK), res(1, "a", OK))
	r, err = CheckLinearizable(spec, false, ops, nil, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, porcupine.Illegal, r.Result)

	// The unknown attempts of one request are one open-ended operation:
	// three timeouts and a refusal of the same reservation, then another
	// customer is refused (a may hold the use) or served (it may not).
	chain := func(last Op) []Op {
		ops := seq(res(1, "a", Unknown), res(1, "a", Unknown), res(1, "a", Unknown), res(1, "a", Unavailable), last)
		for i := range 4 {
			ops[i].Seq = 1
		}
		return ops
	}
	for _, last := range []Op{res(2, "b", OutOfStock), res(2, "b", OK)} {
		r, err = CheckLinearizable(spec, true, chain(last), nil, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, porcupine.Ok, r.Result)
		require.Equal(t, 1, r.Unknown, "one open-ended operation for the chain")
	}
}

// TestCheckThenActIsCaught builds the history a reserve path that checks
// the count and takes the use in two steps produces under concurrency: two
// overlapping reservations both see one use left and both succeed.
func TestCheckThenActIsCaught(t *testing.T) {
	t.Parallel()
	spec := VoucherSpec{Code: "V", TotalLimit: 1, PerUserLimit: 1}
	ops := []Op{
		{Kind: Reserve, Voucher: "V", Customer: "1", OrderID: "a", Call: 0, Return: 10, Outcome: OK},
		{Kind: Reserve, Voucher: "V", Customer: "2", OrderID: "b", Call: 1, Return: 11, Outcome: OK},
	}
	r, err := CheckLinearizable(spec, false, ops, nil, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, porcupine.Illegal, r.Result)
}

// TestModelScales runs the checker on a random concurrent history of the
// size and shape the suite produces (eight clients, one operation at a
// time each, some attempts timing out and retried with the same orderId),
// generated by a correct voucher whose every attempt acts at its call, so
// that the check must find it linearizable, and fast.
func TestModelScales(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{true, false} {
		spec := VoucherSpec{Code: "V", TotalLimit: 40, PerUserLimit: 2}
		ops := simulate(spec, rand.New(rand.NewPCG(1, 2)), 3000, 8)
		began := time.Now()
		r, err := CheckLinearizable(spec, strict, ops, nil, time.Minute)
		require.NoError(t, err)
		require.Equal(t, porcupine.Ok, r.Result, r.Explain)
		t.Logf("strict=%v: checked %d attempts as %d operations (%d open-ended) in %s", strict, len(ops), r.Ops, r.Unknown, time.Since(began))
	}
}

// simulate runs a correct sequential voucher with n attempts from clients
// concurrent clients and returns the history they saw.
func simulate(spec VoucherSpec, rnd *rand.Rand, n, clients int) []Op {
	type order struct {
		id     string
		cust   int64
		status byte
	}
	orders := map[string]*order{}
	var live []*order // held orders, for releases
	remaining := spec.TotalLimit
	cust := map[int64]int{}
	type pending struct {
		kind  Kind
		order *order
		cust  int64
		seq   int
	}
	free := make([]int64, clients)
	cur := make([]*pending, clients)
	seq := 0
	var ops []Op
	for len(ops) < n {
		c := 0
		for j := range free {
			if free[j] < free[c] {
				c = j
			}
		}
		now := free[c]
		p := cur[c]
		if p == nil {
			seq++
			p = &pending{seq: seq}
			if r := rnd.IntN(10); r < 6 || len(live) == 0 {
				o := &order{id: "o" + strconv.Itoa(seq), cust: int64(1 + rnd.IntN(30))}
				orders[o.id] = o
				p.kind, p.order, p.cust = Reserve, o, o.cust
			} else {
				k := rnd.IntN(len(live))
				p.kind, p.order = Release, live[k]
				live = append(live[:k], live[k+1:]...)
			}
			cur[c] = p
		}
		// The attempt acts now, at its call.
		o := p.order
		var out Outcome
		switch p.kind {
		case Reserve:
			switch {
			case o.status == orderReserved:
				out = OK
			case cust[o.cust] >= spec.PerUserLimit:
				out = AlreadyUsed
			case remaining == 0:
				out = OutOfStock
			default:
				out = OK
				o.status = orderReserved
				remaining--
				cust[o.cust]++
			}
		case Release:
			out = OK
			if o.status == orderReserved {
				o.status = orderReleased
				remaining++
				cust[o.cust]--
			}
		}
		op := Op{ID: len(ops), Seq: p.seq, Client: c, Voucher: "V", Kind: p.kind, Customer: strconv.FormatInt(p.cust, 10),
			OrderID: o.id, Call: now, Return: now + 5 + int64(rnd.IntN(40)), Outcome: out}
		if rnd.IntN(20) == 0 {
			// The client gives up on this attempt (whatever it did) and
			// retries the same operation.
			op.Outcome = Unknown
			op.Return = now + 60
		} else {
			cur[c] = nil
			if p.kind == Reserve && out == OK && o.status == orderReserved && !contains(live, o) {
				live = append(live, o)
			}
		}
		free[c] = op.Return + int64(rnd.IntN(5))
		ops = append(ops, op)
	}
	return ops
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestServiceFence: Kafka mode may release on its own an order whose
// reservation outcome stayed unknown (docs/faults.md, finding 8). The model
// explains a later ORDER_RELEASED by it only when the final row is
// RELEASED, and the database check allows such a row only where fencing
// is possible: no 201 for the order, Kafka mode.
func TestServiceFence(t *testing.T) {
	t.Parallel()
	spec := VoucherSpec{Code: "V", TotalLimit: 1, PerUserLimit: 1}
	ops := seq(res(1, "a", Unknown), res(1, "a", OrderReleased), res(2, "b", OK))
	ops[0].Seq, ops[1].Seq = 1, 1
	rows := map[string]Row{"a": {OrderID: "a", Customer: "1", Status: "RELEASED"}, "b": {OrderID: "b", Customer: "2", Status: "RESERVED"}}
	final := func(id string) (Row, bool) { r, ok := rows[id]; return r, ok }

	r, err := CheckLinearizable(spec, true, ops, final, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, r.Result, r.Explain)
	require.Equal(t, 0, r.Unknown, "the attempt and the fence both happened before ORDER_RELEASED was answered")
	r, err = CheckLinearizable(spec, true, ops, nil, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, porcupine.Illegal, r.Result, "without the RELEASED row nothing released the order")

	db := DBState{TotalLimit: 1, PerUserLimit: 1, UsedCount: 1, Rows: rows}
	require.Empty(t, CheckDatabase(spec, ops, db, true))
	require.Len(t, CheckDatabase(spec, ops, db, false), 1)
	require.Contains(t, CheckDatabase(spec, ops, db, false)[0], "RELEASED without a release")
	answered := seq(res(1, "a", OK), res(2, "b", OK))
	require.Len(t, CheckDatabase(spec, answered, db, true), 1, "an order answered 201 is never fenced")
}

// TestCheckFinal503: a held row whose order's last answer was a plain 503
// breaks the promise, unless the client saw a 201 or lost an attempt on
// its side; a 503 marked outcomeUnknown does not excuse a later plain one.
func TestCheckFinal503(t *testing.T) {
	t.Parallel()
	flagged := res(1, "a", Unknown)
	flagged.Status = 503
	timedOut := res(1, "a", Unknown)
	held := DBState{Rows: map[string]Row{"a": {OrderID: "a", Customer: "1", Status: "RESERVED"}}}
	released := DBState{Rows: map[string]Row{"a": {OrderID: "a", Customer: "1", Status: "RELEASED"}}}
	tests := []struct {
		name string
		ops  []Op
		db   DBState
		bad  bool
	}{
		{"only plain 503s, row held", seq(res(1, "a", Unavailable), res(1, "a", Unavailable)), held, true},
		{"flagged, then a plain 503, row held", seq(flagged, res(1, "a", Unavailable)), held, true},
		{"flagged last, row held", seq(res(1, "a", Unavailable), flagged), held, false},
		{"client timeout, then a plain 503", seq(timedOut, res(1, "a", Unavailable)), held, false},
		{"201, then a late plain 503", seq(res(1, "a", OK), res(1, "a", Unavailable)), held, false},
		{"plain 503s, row fenced", seq(flagged, res(1, "a", Unavailable)), released, false},
		{"plain 503 of another customer", seq(res(1, "a", OK), res(2, "a", Unavailable)), held, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.bad, len(CheckFinal503(tc.ops, tc.db)) > 0)
		})
	}
}

// TestModelReplace: a reservation naming the order it replaces takes that
// hold's use over in one step. A replacement that leaks a use (another
// customer gets it), leaves the replaced order held (replayed, confirmed)
// or replaces what is not the customer's hold is rejected.
func TestModelReplace(t *testing.T) {
	t.Parallel()
	one := VoucherSpec{Code: "V", TotalLimit: 1, PerUserLimit: 1}
	two := VoucherSpec{Code: "V", TotalLimit: 2, PerUserLimit: 1}
	tests := []struct {
		name   string
		spec   VoucherSpec
		strict bool
		ops    []Op
		want   porcupine.CheckResult
	}{
		{"takes over the last use", one, true, seq(res(1, "a", OK), repl(1, "b", "a", OK), res(2, "c", OutOfStock),
			res(1, "a", OrderReleased), res(1, "b", OK), conf("a", ReservationReleased), conf("b", OK)), porcupine.Ok},
		{"replay of a replacement", one, true, seq(res(1, "a", OK), repl(1, "b", "a", OK), repl(1, "b", "a", OK)), porcupine.Ok},
		{"not counted against the quota", two, true, seq(res(1, "a", OK), repl(1, "b", "a", OK), res(1, "c", AlreadyUsed),
			res(2, "d", OK)), porcupine.Ok},
		{"the new order releases as any", one, true, seq(res(1, "a", OK), repl(1, "b", "a", OK), rel("b", OK),
			res(2, "c", OK)), porcupine.Ok},
		{"leaks a use", one, false, seq(res(1, "a", OK), repl(1, "b", "a", OK), res(2, "c", OK)), porcupine.Illegal},
		{"leaks a use through the replaced order's release", one, false, seq(res(1, "a", OK), repl(1, "b", "a", OK),
			rel("a", OK), res(2, "c", OK)), porcupine.Illegal},
		{"takes a second use", two, false, seq(res(1, "a", OK), repl(1, "b", "a", OK), res(2, "c", OK),
			res(3, "d", OK)), porcupine.Illegal},
		{"replaced order still held: replayed", one, false, seq(res(1, "a", OK), repl(1, "b", "a", OK),
			res(1, "a", OK)), porcupine.Illegal},
		{"replaced order still held: confirmed", one, false, seq(res(1, "a", OK), repl(1, "b", "a", OK),
			conf("a", OK)), porcupine.Illegal},
		{"a confirmed order is not replaced", one, true, seq(res(1, "a", OK), conf("a", OK),
			repl(1, "b", "a", ReplacedOrderNotHeld), res(1, "b", AlreadyUsed)), porcupine.Ok},
		{"a confirmed order replaced", one, false, seq(res(1, "a", OK), conf("a", OK), repl(1, "b", "a", OK)), porcupine.Illegal},
		{"another customer's order is not replaced", two, true, seq(res(1, "a", OK), repl(2, "b", "a", ReplacedOrderNotHeld),
			res(1, "a", OK)), porcupine.Ok},
		{"another customer's order replaced", two, false, seq(res(1, "a", OK), repl(2, "b", "a", OK)), porcupine.Illegal},
		{"a released order is not replaced", one, true, seq(res(1, "a", OK), rel("a", OK),
			repl(1, "b", "a", ReplacedOrderNotHeld)), porcupine.Ok},
		{"a replaced order is not replaced again", two, false, seq(res(1, "a", OK), repl(1, "b", "a", OK),
			repl(1, "c", "a", OK)), porcupine.Illegal},
		{"an unknown order is not replaced", one, false, seq(repl(1, "b", "a", OK)), porcupine.Illegal},
		{"a known orderId answers as a reservation", two, true, seq(res(1, "a", OK), res(2, "b", OK),
			repl(1, "b", "a", OrderConflict), res(1, "a", OK)), porcupine.Ok},
		{"strict: a held order must be replaced", one, true, seq(res(1, "a", OK), repl(1, "b", "a", ReplacedOrderNotHeld)), porcupine.Illegal},
		{"flash: a refused replacement keeps the hold", one, false, seq(res(1, "a", OK), repl(1, "b", "a", ReplacedOrderNotHeld),
			res(1, "a", OK), res(2, "c", OutOfStock)), porcupine.Ok},
		{"unknown replacement that acted", one, true, seq(res(1, "a", OK), repl(1, "b", "a", Unknown),
			res(1, "a", OrderReleased), res(1, "b", OK)), porcupine.Ok},
		{"unknown replacement that did not act", one, true, seq(res(1, "a", OK), repl(1, "b", "a", Unknown),
			res(1, "a", OK), res(2, "c", OutOfStock)), porcupine.Ok},
		{"unknown replacement cannot hold twice", one, false, seq(res(1, "a", OK), repl(1, "b", "a", Unknown),
			res(1, "b", OK), res(1, "a", OK)), porcupine.Illegal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := CheckLinearizable(tc.spec, tc.strict, tc.ops, nil, 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, tc.want, r.Result, r.Explain)
			if tc.want == porcupine.Illegal {
				require.Contains(t, r.Explain, "cannot be placed")
			}
		})
	}
}

// TestModelCampaign: a campaign's codes are each held by at most one live
// order, and its budget and per-customer limit hold across codes.
func TestModelCampaign(t *testing.T) {
	t.Parallel()
	spec := VoucherSpec{Code: "cmp_1", TotalLimit: 2, PerUserLimit: 1, Codes: []string{"K0", "K1", "K2"}}
	tests := []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"a code once", seq(resK(1, "a", "K0", OK), resK(2, "b", "K0", AlreadyUsed), resK(2, "c", "K1", OK),
			resK(3, "d", "K2", OutOfStock)), porcupine.Ok},
		{"a code held twice", seq(resK(1, "a", "K0", OK), resK(2, "b", "K0", OK)), porcupine.Illegal},
		{"a released code is free again", seq(resK(1, "a", "K0", OK), relK("a", "K0", OK), resK(2, "b", "K0", OK)), porcupine.Ok},
		{"a confirmed code stays used", seq(resK(1, "a", "K0", OK), confK("a", "K0", OK), resK(2, "b", "K0", OK)), porcupine.Illegal},
		{"budget across codes", seq(resK(1, "a", "K0", OK), resK(2, "b", "K1", OK), resK(3, "c", "K2", OK)), porcupine.Illegal},
		{"per-customer limit across codes", seq(resK(1, "a", "K0", OK), resK(1, "b", "K1", OK)), porcupine.Illegal},
		{"replay with the same code", seq(resK(1, "a", "K0", OK), resK(1, "a", "K0", OK), resK(2, "b", "K1", OK)), porcupine.Ok},
		{"replay with another code", seq(resK(1, "a", "K0", OK), resK(1, "a", "K1", OrderConflict)), porcupine.Ok},
		{"replay with another code taken", seq(resK(1, "a", "K0", OK), resK(1, "a", "K1", OK)), porcupine.Illegal},
		{"two orders race for a code", []Op{
			{Kind: Reserve, Voucher: "K0", Customer: "1", OrderID: "a", Call: 0, Return: 10, Outcome: OK},
			{Kind: Reserve, Voucher: "K0", Customer: "2", OrderID: "b", Call: 1, Return: 11, Outcome: OK},
		}, porcupine.Illegal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := CheckLinearizable(spec, true, tc.ops, nil, 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, tc.want, r.Result, r.Explain)
		})
	}
	_, err := CheckLinearizable(spec, true, seq(resK(1, "a", "cmp_1", OK)), nil, time.Second)
	require.ErrorContains(t, err, "names no code of the campaign", "the budget's own code is no code of it")
}

// replK is a replacement presenting campaign code code.
func replK(cust int64, order, code, replaces string, out Outcome) Op {
	op := resK(cust, order, code, out)
	op.Replaces = replaces
	return op
}

// TestModelCampaignReplace: a replacement on a campaign frees the replaced
// order's code and takes the presented one (the same or another) in one
// step, with the budget and the customer's count unchanged; a code another
// live order holds is ALREADY_USED, after the check of the replaced order.
// A replacement that keeps the old code held, takes a held code, leaks a
// use or replaces what is not the customer's hold is rejected.
func TestModelCampaignReplace(t *testing.T) {
	t.Parallel()
	one := VoucherSpec{Code: "cmp_1", TotalLimit: 1, PerUserLimit: 1, Codes: []string{"K0", "K1", "K2"}}
	three := VoucherSpec{Code: "cmp_1", TotalLimit: 3, PerUserLimit: 1, Codes: []string{"K0", "K1", "K2"}}
	tests := []struct {
		name   string
		spec   VoucherSpec
		strict bool
		ops    []Op
		want   porcupine.CheckResult
	}{
		{"the same code moves over", three, true, seq(resK(1, "a", "K0", OK), replK(1, "b", "K0", "a", OK),
			resK(2, "c", "K0", AlreadyUsed), resK(1, "a", "K0", OrderReleased), resK(1, "b", "K0", OK)), porcupine.Ok},
		{"another code: the old one comes free", three, true, seq(resK(1, "a", "K0", OK), replK(1, "b", "K1", "a", OK),
			resK(2, "c", "K0", OK), resK(3, "d", "K1", AlreadyUsed)), porcupine.Ok},
		{"strict: the old code kept held", three, true, seq(resK(1, "a", "K0", OK), replK(1, "b", "K1", "a", OK),
			resK(2, "c", "K0", AlreadyUsed)), porcupine.Illegal},
		{"the new code not taken", three, true, seq(resK(1, "a", "K0", OK), replK(1, "b", "K1", "a", OK),
			resK(2, "c", "K1", OK)), porcupine.Illegal},
		{"takes over the last use", one, true, seq(resK(1, "a", "K0", OK), replK(1, "b", "K1", "a", OK),
			resK(2, "c", "K0", OutOfStock), resK(1, "c", "K2", AlreadyUsed)), porcupine.Ok},
		{"leaks a use", one, false, seq(resK(1, "a", "K0", OK), replK(1, "b", "K1", "a", OK),
			resK(2, "c", "K0", OK)), porcupine.Illegal},
		{"a code another order holds", three, true, seq(resK(1, "a", "K0", OK), resK(2, "b", "K1", OK),
			replK(1, "c", "K1", "a", AlreadyUsed), resK(1, "a", "K0", OK), resK(3, "d", "K2", OK)), porcupine.Ok},
		{"a code another order holds, taken", three, false, seq(resK(1, "a", "K0", OK), resK(2, "b", "K1", OK),
			replK(1, "c", "K1", "a", OK)), porcupine.Illegal},
		{"a confirmed order's code", three, true, seq(resK(2, "b", "K1", OK), confK("b", "K1", OK),
			resK(1, "a", "K0", OK), replK(1, "c", "K1", "a", AlreadyUsed)), porcupine.Ok},
		{"a released order's code is free", three, true, seq(resK(2, "b", "K1", OK), relK("b", "K1", OK),
			resK(1, "a", "K0", OK), replK(1, "c", "K1", "a", OK), resK(2, "d", "K0", OK)), porcupine.Ok},
		{"the replaced order is checked before the code", three, true, seq(resK(1, "a", "K0", OK), resK(2, "b", "K1", OK),
			replK(3, "c", "K1", "a", ReplacedOrderNotHeld)), porcupine.Ok},
		{"strict: not held, not code used", three, true, seq(resK(1, "a", "K0", OK), resK(2, "b", "K1", OK),
			replK(3, "c", "K1", "a", AlreadyUsed)), porcupine.Illegal},
		{"another customer's order replaced", three, false, seq(resK(1, "a", "K0", OK),
			replK(2, "b", "K1", "a", OK)), porcupine.Illegal},
		{"a confirmed order is not replaced", three, true, seq(resK(1, "a", "K0", OK), confK("a", "K0", OK),
			replK(1, "b", "K0", "a", ReplacedOrderNotHeld), resK(2, "c", "K0", AlreadyUsed)), porcupine.Ok},
		{"replay of a replacement with another code", three, true, seq(resK(1, "a", "K0", OK),
			replK(1, "b", "K1", "a", OK), replK(1, "b", "K2", "a", OrderConflict), replK(1, "b", "K1", "a", OK)), porcupine.Ok},
		{"the new order's release frees its code", one, true, seq(resK(1, "a", "K0", OK), replK(1, "b", "K1", "a", OK),
			relK("b", "K1", OK), resK(2, "c", "K1", OK)), porcupine.Ok},
		{"flash: code used refused in any state", three, false, seq(resK(1, "a", "K0", OK),
			replK(1, "b", "K1", "a", AlreadyUsed), resK(1, "a", "K0", OK), resK(2, "c", "K1", OK)), porcupine.Ok},
		{"flash: not held refused in any state", three, false, seq(resK(1, "a", "K0", OK),
			replK(1, "b", "K1", "a", ReplacedOrderNotHeld), resK(1, "a", "K0", OK)), porcupine.Ok},
		{"unknown replacement that acted", three, true, seq(resK(1, "a", "K0", OK), replK(1, "b", "K1", "a", Unknown),
			resK(2, "c", "K0", OK), resK(2, "d", "K1", AlreadyUsed)), porcupine.Ok},
		{"unknown replacement cannot free a code and keep it", three, false, seq(resK(1, "a", "K0", OK),
			replK(1, "b", "K1", "a", Unknown), resK(2, "c", "K0", OK), resK(1, "a", "K0", OK)), porcupine.Illegal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := CheckLinearizable(tc.spec, tc.strict, tc.ops, nil, 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, tc.want, r.Result, r.Explain)
			if tc.want == porcupine.Illegal {
				require.Contains(t, r.Explain, "cannot be placed")
			}
		})
	}
}

// TestCheckDatabaseReplacement: a replacement answered 201 must leave the
// replaced order RELEASED (else the customer holds the use twice), and a
// replacement explains a RELEASED row no client released.
func TestCheckDatabaseReplacement(t *testing.T) {
	t.Parallel()
	spec := VoucherSpec{Code: "V", TotalLimit: 2, PerUserLimit: 1}
	rows := func(a, b string) DBState {
		return DBState{TotalLimit: 2, PerUserLimit: 1, Rows: map[string]Row{
			"a": {OrderID: "a", Customer: "1", Status: a}, "b": {OrderID: "b", Customer: "1", Status: b}}}
	}
	ops := seq(res(1, "a", OK), repl(1, "b", "a", OK))
	require.Empty(t, CheckDatabase(spec, ops, rows("RELEASED", "RESERVED"), false))
	bad := CheckDatabase(spec, ops, rows("RESERVED", "RESERVED"), false)
	require.Len(t, bad, 1)
	require.Contains(t, bad[0], "replaced by b (201) but its row is RESERVED")

	unknown := seq(res(1, "a", OK), repl(1, "b", "a", Unknown))
	require.Empty(t, CheckDatabase(spec, unknown, rows("RELEASED", "RESERVED"), false), "an unknown replacement may have acted")
	refused := seq(res(1, "a", OK), repl(1, "b", "a", ReplacedOrderNotHeld))
	bad = CheckDatabase(spec, refused, DBState{Rows: map[string]Row{"a": {OrderID: "a", Customer: "1", Status: "RELEASED"}}}, false)
	require.Len(t, bad, 1)
	require.Contains(t, bad[0], "RELEASED without a release")
}

// TestCheckDatabaseCampaign: a row carries the code its order was asked
// with.
func TestCheckDatabaseCampaign(t *testing.T) {
	t.Parallel()
	spec := VoucherSpec{Code: "cmp_1", TotalLimit: 2, PerUserLimit: 1, Codes: []string{"K0", "K1"}}
	ops := seq(resK(1, "a", "K0", OK))
	db := func(code string) DBState {
		return DBState{Rows: map[string]Row{"a": {OrderID: "a", Customer: "1", Status: "RESERVED", Code: code}}}
	}
	require.Empty(t, CheckDatabase(spec, ops, db("K0"), false))
	bad := CheckDatabase(spec, ops, db("K1"), false)
	require.Len(t, bad, 2)
	require.Contains(t, bad[0], "201 for code K0 but the row has code \"K1\"")
	require.Contains(t, bad[1], "no attempt of its customer with its code K1")

	// A replacement presenting another code: the replaced row RELEASED
	// with its own code, the new row with the code presented.
	repl := seq(resK(1, "a", "K0", OK), replK(1, "b", "K1", "a", OK))
	rows := func(a, b Row) DBState { return DBState{Rows: map[string]Row{"a": a, "b": b}} }
	a := Row{OrderID: "a", Customer: "1", Status: "RELEASED", Code: "K0"}
	b := Row{OrderID: "b", Customer: "1", Status: "RESERVED", Code: "K1"}
	require.Empty(t, CheckDatabase(spec, repl, rows(a, b), false))
	held := a
	held.Status = "RESERVED"
	bad = CheckDatabase(spec, repl, rows(held, b), false)
	require.Len(t, bad, 1)
	require.Contains(t, bad[0], "replaced by b (201) but its row is RESERVED")
	wrong := b
	wrong.Code = "K0"
	bad = CheckDatabase(spec, repl, rows(a, wrong), false)
	require.Len(t, bad, 2)
	require.Contains(t, bad[0], "201 for code K1 but the row has code \"K0\"")
}
