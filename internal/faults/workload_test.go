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
// customers. Every attempt that gets no definite answer is retried with
// the same orderId, on the next instance, until one comes or the hard
// deadline passes; a share of reservations answered nothing but plain
// 503s stops at one, as the contract allows.
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

	seq        atomic.Int64
	unresolved atomic.Int64
	hard       atomic.Int64 // UnixNano after which retries stop

	mu    sync.Mutex
	known []ownedOrder // orders that got a 201, for conflict probes
}

type ownedOrder struct {
	id   string
	cust int64
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

func (w *workload) client(soft context.Context, id int, c *client, rnd *rand.Rand) {
	var held, mine []ownedOrder
	n := 0
	rushUntil := time.Now().Add(w.rush)
	for soft.Err() == nil {
		if time.Now().After(rushUntil) {
			time.Sleep(time.Duration(rnd.Int64N(int64(w.think) + 1)))
		}
		switch r := rnd.IntN(100); {
		case r < 55 || len(held) == 0:
			n++
			o := ownedOrder{id: fmt.Sprintf("%s-c%d-%d", w.spec.Code, id, n), cust: 1 + rnd.Int64N(int64(w.customers))}
			if w.do(c, rnd, Op{Kind: Reserve, Customer: customerName(o.cust), OrderID: o.id}) == OK {
				held = append(held, o)
				mine = append(mine, o)
				w.mu.Lock()
				w.known = append(w.known, o)
				w.mu.Unlock()
			}
		case r < 75:
			k := rnd.IntN(len(held))
			o := held[k]
			if w.do(c, rnd, Op{Kind: Release, OrderID: o.id}).Definite() {
				held = append(held[:k], held[k+1:]...)
			}
		case r < 85:
			o := held[rnd.IntN(len(held))]
			w.do(c, rnd, Op{Kind: Confirm, OrderID: o.id})
		case r < 93:
			// Someone else's order for another customer: ORDER_CONFLICT.
			w.mu.Lock()
			o := w.known[rnd.IntN(len(w.known))]
			w.mu.Unlock()
			other := 1 + (o.cust+rnd.Int64N(int64(w.customers-1)))%int64(w.customers)
			w.do(c, rnd, Op{Kind: Reserve, Customer: customerName(other), OrderID: o.id})
		default:
			// A late retry of one of ours: 201 replay or ORDER_RELEASED.
			o := mine[rnd.IntN(len(mine))]
			w.do(c, rnd, Op{Kind: Reserve, Customer: customerName(o.cust), OrderID: o.id})
		}
	}
}

// do runs one operation: attempts until a definite outcome, the hard
// deadline, or (giveUp503) a plain 503 after nothing but plain 503s, and
// returns the last outcome.
func (w *workload) do(c *client, rnd *rand.Rand, op Op) Outcome {
	op.Seq = int(w.seq.Add(1))
	op.Voucher = w.spec.Code
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
