package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// workload is a flash sale: clients reserve uses for customers of a small
// pool (so per-customer quotas bind), release and confirm some of their
// reservations, and probe idempotency with replays and conflicting
// customers. Customers also retry "after a failed payment": a new order
// replacing their hold (replacesOrderId), and a probe names another
// customer's order as the one replaced. On a campaign (spec.Codes), each
// reservation presents one code, a few hot codes drawing a share of them
// so that orders race for one code; a replacement presents its replaced
// order's code or another one (replaceSameCode); replays of an order name
// its code or another one. Every attempt that gets no
// definite answer is retried with the same orderId, on the next instance,
// until one comes or the hard deadline passes; a share of reservations
// answered nothing but plain 503s stops at one, as the contract allows.
type workload struct {
	spec      VoucherSpec
	hist      *History
	addrs     func() []string
	clients   int
	customers int
	// attemptTimeout is the client's patience for one attempt;
	// shortTimeouts is the share of attempts given 5-40ms instead, so that
	// clients give up on requests that are still running (the "client
	// timeout" fault).
	attemptTimeout time.Duration
	shortTimeouts  float64
	// giveUp503 is the share of reservations whose client takes a plain
	// 503 as the final answer ("nothing was taken") when every attempt so
	// far was one, as a client that reads the last answer does (the Go
	// client keeps an earlier unknown outcome instead); CheckFinal503
	// checks the promise.
	giveUp503 float64
	think     time.Duration
	// rush is how long the clients start without thinking, as a flash
	// sale's opening does: reservations overlap on the voucher row, where
	// a check-then-act write path loses updates.
	rush time.Duration
	seed uint64
	// shares is the mix of operations (voucherShares or campaignShares).
	shares shares

	seq        atomic.Int64
	unresolved atomic.Int64
	hard       atomic.Int64 // UnixNano after which retries stop

	mu    sync.Mutex
	known []ownedOrder // orders that got a 201, for conflict probes
}

type ownedOrder struct {
	id   string
	cust int64
	code string // the code it was reserved with (the campaign code, or the voucher's)
	// replaces is the order it replaced; "" for a plain reservation.
	replaces string
}

// hotCodes is how many of a campaign's codes draw hotShare of the
// reservations, so that several orders present one code at once.
const (
	hotCodes = 4
	hotShare = 0.3
	// replaceSameCode is the share of a campaign's replacements that
	// present the replaced order's code; the others present a code drawn
	// as a new reservation's (hot ones included, so that CODE_USED comes).
	replaceSameCode = 0.4
)

// pickCode is the code a new reservation presents.
func (w *workload) pickCode(rnd *rand.Rand) string {
	codes := w.spec.Codes
	switch {
	case len(codes) == 0:
		return w.spec.Code
	case rnd.Float64() < hotShare:
		return codes[rnd.IntN(min(hotCodes, len(codes)))]
	}
	return codes[rnd.IntN(len(codes))]
}

// run runs the clients until soft ends, then lets each finish the
// operation it is in (retrying until hardDeadline).
func (w *workload) run(soft context.Context, hardDeadline time.Time) {
	w.hard.Store(hardDeadline.UnixNano())
	transport := newTransport()
	defer transport.CloseIdleConnections()
	var wg sync.WaitGroup
	for i := 0; i < w.clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &client{id: i, hc: &http.Client{Transport: transport}, hist: w.hist, addrs: w.addrs, next: i}
			w.client(soft, i, c, rand.New(rand.NewPCG(w.seed, uint64(i))))
		}()
	}
	wg.Wait()
}

// The shares of the operations, cumulative percentages of a random draw
// in [0, 100): a new reservation (always, while the client holds nothing),
// a release, a confirm, another customer's orderId, a replacement of a
// hold and a replacement naming another customer's order, and a late retry
// of one of the client's orders after the rest.
var (
	voucherShares  = shares{reserve: 50, release: 70, confirm: 80, conflict: 86, replace: 92, replaceOther: 94}
	campaignShares = shares{reserve: 47, release: 67, confirm: 77, conflict: 83, replace: 89, replaceOther: 91}
)

type shares struct{ reserve, release, confirm, conflict, replace, replaceOther int }

// sharesFor is the mix of operations of a scenario on spec.
func sharesFor(spec VoucherSpec) shares {
	if spec.Campaign() {
		return campaignShares
	}
	return voucherShares
}

func (w *workload) client(soft context.Context, id int, c *client, rnd *rand.Rand) {
	var held, mine []ownedOrder
	n := 0
	newOrder := func() string {
		n++
		return fmt.Sprintf("%s-c%d-%d", w.spec.Code, id, n)
	}
	took := func(o ownedOrder) {
		held = append(held, o)
		mine = append(mine, o)
		w.mu.Lock()
		w.known = append(w.known, o)
		w.mu.Unlock()
	}
	sh := w.shares
	rushUntil := time.Now().Add(w.rush)
	for soft.Err() == nil {
		if time.Now().After(rushUntil) {
			time.Sleep(time.Duration(rnd.Int64N(int64(w.think) + 1)))
		}
		switch r := rnd.IntN(100); {
		case r < sh.reserve || len(held) == 0:
			o := ownedOrder{id: newOrder(), cust: 1 + rnd.Int64N(int64(w.customers)), code: w.pickCode(rnd)}
			if w.do(c, rnd, Op{Kind: Reserve, Voucher: o.code, Customer: customerName(o.cust), OrderID: o.id}) == OK {
				took(o)
			}
		case r < sh.release:
			k := rnd.IntN(len(held))
			o := held[k]
			if w.do(c, rnd, Op{Kind: Release, Voucher: o.code, OrderID: o.id}).Definite() {
				held = append(held[:k], held[k+1:]...)
			}
		case r < sh.confirm:
			o := held[rnd.IntN(len(held))]
			w.do(c, rnd, Op{Kind: Confirm, Voucher: o.code, OrderID: o.id})
		case r < sh.conflict:
			// Someone else's order for another customer: ORDER_CONFLICT.
			w.mu.Lock()
			o := w.known[rnd.IntN(len(w.known))]
			w.mu.Unlock()
			other := 1 + (o.cust+rnd.Int64N(int64(w.customers-1)))%int64(w.customers)
			w.do(c, rnd, Op{Kind: Reserve, Voucher: o.code, Customer: customerName(other), OrderID: o.id})
		case r < sh.replace:
			// The payment of a held order failed: a new order takes its
			// use over. A confirmed one cannot be replaced
			// (REPLACED_ORDER_NOT_HELD). On a campaign the new order
			// presents the old one's code or another (CODE_USED when
			// another order holds it).
			k := rnd.IntN(len(held))
			old := held[k]
			o := ownedOrder{id: newOrder(), cust: old.cust, code: old.code, replaces: old.id}
			if w.spec.Campaign() && rnd.Float64() >= replaceSameCode {
				o.code = w.pickCode(rnd)
			}
			if w.do(c, rnd, Op{Kind: Reserve, Voucher: o.code, Customer: customerName(o.cust), OrderID: o.id, Replaces: old.id}) == OK {
				held = append(held[:k], held[k+1:]...)
				took(o)
			}
		case r < sh.replaceOther:
			// A new order naming another customer's order as the one it
			// replaces: REPLACED_ORDER_NOT_HELD, whatever that order's state.
			w.mu.Lock()
			old := w.known[rnd.IntN(len(w.known))]
			w.mu.Unlock()
			other := 1 + (old.cust+rnd.Int64N(int64(w.customers-1)))%int64(w.customers)
			code := old.code
			if w.spec.Campaign() && rnd.IntN(2) == 0 {
				code = w.pickCode(rnd)
			}
			w.do(c, rnd, Op{Kind: Reserve, Voucher: code, Customer: customerName(other), OrderID: newOrder(), Replaces: old.id})
		default:
			// A late retry of one of ours: 201 replay or ORDER_RELEASED
			// (a replaced order included); a retry of a replacement
			// names the order it replaced or not, as a client may; on a
			// campaign a third of them name another code: ORDER_CONFLICT.
			o := mine[rnd.IntN(len(mine))]
			op := Op{Kind: Reserve, Voucher: o.code, Customer: customerName(o.cust), OrderID: o.id}
			if o.replaces != "" && rnd.IntN(2) == 0 {
				op.Replaces = o.replaces
			}
			if len(w.spec.Codes) > 1 && rnd.IntN(3) == 0 {
				for op.Voucher == o.code {
					op.Voucher = w.spec.Codes[rnd.IntN(len(w.spec.Codes))]
				}
			}
			w.do(c, rnd, op)
		}
	}
}

// do runs one operation: attempts until a definite outcome, the hard
// deadline, or (giveUp503) a plain 503 after nothing but plain 503s, and
// returns the last outcome.
func (w *workload) do(c *client, rnd *rand.Rand, op Op) Outcome {
	op.Seq = int(w.seq.Add(1))
	op.Client = c.id
	backoff := 20 * time.Millisecond
	only503 := true
	for {
		timeout := w.attemptTimeout
		if rnd.Float64() < w.shortTimeouts {
			timeout = time.Duration(5+rnd.IntN(36)) * time.Millisecond
		}
		out := c.attempt(op, timeout)
		if out.Definite() {
			return out
		}
		only503 = only503 && (out == Unavailable || out == NotSent)
		if op.Kind == Reserve && out == Unavailable && only503 && rnd.Float64() < w.giveUp503 {
			return out
		}
		if time.Now().UnixNano() > w.hard.Load() {
			w.unresolved.Add(1)
			return out
		}
		time.Sleep(backoff/2 + time.Duration(rnd.Int64N(int64(backoff/2)+1)))
		backoff = min(2*backoff, 300*time.Millisecond)
	}
}

// customerName is the customerId of the workload's customer n: a string id
// of the shape shops use (a prefix and an e-mail-like tail), so that the
// fault suite exercises string customerIds end to end.
func customerName(n int64) string { return fmt.Sprintf("cus_%d@faults.example", n) }
