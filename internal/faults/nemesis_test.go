package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Fault kinds.
const (
	faultKillInstance  = "kill-instance"  // kill -9 a voucherd serve, start it again
	faultPauseInstance = "pause-instance" // SIGSTOP a voucherd serve, SIGCONT it
	faultKillPostgres  = "kill-postgres"  // kill -9 PostgreSQL, start it again (crash recovery)
	faultStopPostgres  = "stop-postgres"  // fast shutdown of PostgreSQL, start it again
	// immediate shutdown of PostgreSQL (pg_ctl stop -m immediate) while
	// reservations are being written, start it again: commits in progress
	// complete with their answers lost
	faultImmediatePostgres = "immediate-stop-postgres"
	faultKillRedis         = "kill-redis"     // kill -9 Redis (no persistence: it comes back empty)
	faultKillKafka         = "kill-kafka"     // kill -9 the Kafka broker, start it again
	faultKillConsumer      = "kill-consumer"  // kill -9 `voucherd consume`, start it again
	faultPauseConsumer     = "pause-consumer" // SIGSTOP `voucherd consume`, SIGCONT it
	// Calls hang instead of failing: every byte between the voucherd
	// processes and the dependency is held back, then let through (a
	// proxy; for the broker, which clients reach at the address it
	// advertises, SIGSTOP and SIGCONT of the broker).
	faultHangRedis    = "hang-redis"
	faultHangPostgres = "hang-postgres"
	faultHangKafka    = "hang-kafka"
)

// strandCheckAfter is how long after a hang heals the nemesis checks that
// no use is stranded (checkStranded): past the instances' settle (a second
// for a retry, then a round every 250 ms), short of reconciliation's grace
// (3 s in these clusters) for most holds the hang left.
const strandCheckAfter = 2 * time.Second

// answeringFor is how long after an attempt's answer (or the client's
// giving up) its order counts as being answered: its instance leaves a
// take without an answer to a retry for a second, then settles it in a
// round every 250 ms (the service's unansweredSettleDelay and
// settleDelay), so a use the attempt took may stay held that long.
const answeringFor = 1500 * time.Millisecond

// strandQuiet is how long before a stranded check no fault of a process
// (an instance or the consumer) may have run for the check to count: a
// killed or paused instance's holds wait for its heartbeat to expire,
// which is another window. A fault of a dependency must have ended before
// the hang began.
const strandQuiet = 8 * time.Second

// faultsFor lists the faults that apply to a mode. Client timeouts and
// retries are not listed: the workload injects them all along.
func faultsFor(mode string) []string {
	f := []string{faultKillInstance, faultPauseInstance, faultKillPostgres, faultStopPostgres, faultImmediatePostgres, faultKillRedis,
		faultHangRedis, faultHangPostgres}
	if mode == modeKafka {
		f = append(f, faultKillKafka, faultKillConsumer, faultPauseConsumer, faultHangKafka)
	}
	return f
}

// fault is one planned and then injected fault.
type fault struct {
	Kind   string
	Target int           // instance index for instance faults
	Gap    time.Duration // quiet time before it
	Dur    time.Duration // how long the target stays down or paused
	// Start and End are when it was injected and healed, on the history
	// clock; Err is a failure to heal.
	Start, End time.Duration
	Err        string
}

func (f fault) String() string {
	s := f.Kind
	if strings.HasSuffix(f.Kind, "-instance") {
		s += fmt.Sprintf("(%d)", f.Target)
	}
	s += fmt.Sprintf(" %.1fs→%.1fs", f.Start.Seconds(), f.End.Seconds())
	if f.Err != "" {
		s += " ERROR " + f.Err
	}
	return s
}

// plan draws a schedule of faults from kinds: each kind in order when
// each is set (short form), else kinds at random until window is filled.
func plan(rnd *rand.Rand, kinds []string, each bool, window time.Duration, instances int) []fault {
	var out []fault
	total := time.Duration(0)
	for i := 0; ; i++ {
		var kind string
		if each {
			if i == len(kinds) {
				break
			}
			kind = kinds[i]
		} else {
			if total >= window {
				break
			}
			kind = kinds[rnd.IntN(len(kinds))]
		}
		f := fault{Kind: kind, Target: rnd.IntN(instances), Gap: time.Duration(500+rnd.IntN(1500)) * time.Millisecond}
		switch kind {
		case faultPauseInstance, faultPauseConsumer:
			// Longer than the clients' patience, so attempts in flight are
			// given up on and retried elsewhere while the process is stalled.
			f.Dur = time.Duration(1000+rnd.IntN(3000)) * time.Millisecond
		case faultKillKafka, faultKillConsumer:
			f.Dur = time.Duration(1000+rnd.IntN(2000)) * time.Millisecond
		case faultHangRedis, faultHangPostgres, faultHangKafka:
			// Past the calls' timeouts (Redis 500 ms, a produce 500 ms)
			// and the clients' patience (800 ms).
			f.Dur = time.Duration(1000+rnd.IntN(2000)) * time.Millisecond
		default:
			f.Dur = time.Duration(300+rnd.IntN(1700)) * time.Millisecond
		}
		total += f.Gap + f.Dur
		out = append(out, f)
	}
	return out
}

// nemesis injects planned faults into a cluster, one at a time per
// nemesis; several nemeses may run at once.
type nemesis struct {
	c    *cluster
	hist *History
	// code is the gate code of the sale (checkStranded).
	code string
	// codes, when set (the stack scenario), are the gate codes
	// checkStranded reads instead of code; a hold's orderId may then be a
	// stack member's (voucher.StackMemberOrderID), being answered when its
	// stack's orderId is.
	codes []string
	// active counts the faults being injected, across schedules.
	active atomic.Int32
	mu     sync.Mutex
	done   []fault
	// stranded lists the uses checkStranded found stranded, and checks
	// lists what each check found; guarded by mu.
	stranded, checks []string
}

// run injects faults in order; it stops early when ctx ends (the fault in
// progress is still healed).
func (n *nemesis) run(ctx context.Context, faults []fault) {
	for _, f := range faults {
		if !waitCtx(ctx, f.Gap) {
			return
		}
		f.Start = time.Duration(n.hist.Since())
		n.active.Add(1)
		err := n.inject(f)
		if err != nil {
			f.Err = err.Error()
		}
		f.End = time.Duration(n.hist.Since())
		if err == nil && strings.HasPrefix(f.Kind, "hang-") && n.c.mode != modeStandard {
			n.checkStranded(f)
		}
		n.active.Add(-1)
		n.mu.Lock()
		n.done = append(n.done, f)
		n.mu.Unlock()
	}
}

// inject applies f, waits f.Dur and heals it.
func (n *nemesis) inject(f fault) error {
	c, t := n.c, n.c.t
	switch f.Kind {
	case faultKillInstance:
		p := c.instances[f.Target]
		p.kill()
		time.Sleep(f.Dur)
		return p.startUntilHealthy(90 * time.Second)
	case faultPauseInstance:
		p := c.instances[f.Target]
		p.pause()
		time.Sleep(f.Dur)
		p.resume()
	case faultKillConsumer:
		c.consumer.kill()
		time.Sleep(f.Dur)
		return c.consumer.startUntilHealthy(90 * time.Second)
	case faultPauseConsumer:
		c.consumer.pause()
		time.Sleep(f.Dur)
		c.consumer.resume()
	case faultKillPostgres, faultStopPostgres, faultImmediatePostgres:
		c.lockDep("postgres")
		defer c.unlockDep("postgres")
		switch f.Kind {
		case faultKillPostgres:
			c.pg.Kill(t)
		case faultImmediatePostgres:
			n.waitForWrites()
			c.pg.StopImmediate(t)
		default:
			c.pg.Stop(t)
		}
		time.Sleep(f.Dur)
		c.pg.Start(t)
	case faultKillRedis:
		c.lockDep("redis")
		defer c.unlockDep("redis")
		c.redis.Kill(t)
		time.Sleep(f.Dur)
		c.redis.Start(t)
	case faultKillKafka:
		c.lockDep("kafka")
		defer c.unlockDep("kafka")
		c.kafka.Kill(t)
		time.Sleep(f.Dur)
		c.kafka.Start(t)
	case faultHangRedis:
		c.lockDep("redis")
		defer c.unlockDep("redis")
		<-c.redisProxy.Hang(f.Dur)
	case faultHangPostgres:
		c.lockDep("postgres")
		defer c.unlockDep("postgres")
		<-c.pgProxy.Hang(f.Dur)
	case faultHangKafka:
		c.lockDep("kafka")
		defer c.unlockDep("kafka")
		c.kafka.Pause(t)
		time.Sleep(f.Dur)
		c.kafka.Resume(t)
	default:
		return fmt.Errorf("unknown fault %q", f.Kind)
	}
	return nil
}

// checkStranded checks, strandCheckAfter after hang f healed, that no use
// of the sale's code (of every code of the stack scenario, n.codes) is
// stranded: every hold the gate counts is held by a row, by an
// acknowledged event on its way to the store (Kafka mode: a hold no
// longer pending), or by an order still being answered (an attempt on it,
// a reservation, release or confirm, in flight or answered within the
// last second, which a retry may follow; a stack member's hold, when its
// stack's orderId is); the rest of the uses are free. The check is left out when
// another fault runs now or may have left holds of its own (overlapped).
func (n *nemesis) checkStranded(f fault) {
	time.Sleep(strandCheckAfter)
	now := n.hist.Since()
	if n.active.Load() > 1 || n.overlapped(f, time.Duration(now)) {
		n.noteCheck(fmt.Sprintf("%s: not checked (another fault overlapped)", f))
		return
	}
	// PostgreSQL first: a row that changes between the two reads was
	// being written, so its order is being answered (below).
	codes := n.codes
	if len(codes) == 0 {
		codes = []string{n.code}
	}
	dbs := make([]DBState, len(codes))
	gates := make([]map[string]voucher.Hold, len(codes))
	for i, code := range codes {
		dbs[i] = n.c.dbState(code)
		orders, ok := n.c.gateHolds(code, 5*time.Second)
		if !ok {
			n.noteCheck(fmt.Sprintf("%s: not checked (voucher %s not in Redis)", f, code))
			return
		}
		gates[i] = orders
	}
	now = n.hist.Since()
	answering := map[string]bool{}
	// orderOf maps a stack member's orderId to its stack's.
	orderOf := map[string]string{}
	ops := n.hist.Ops()
	for _, op := range ops {
		for pos := 2; pos <= len(StackCodes(op.Voucher)); pos++ {
			orderOf[voucher.StackMemberOrderID(op.OrderID, pos)] = op.OrderID
		}
		if op.Return < 0 || now-op.Return < int64(answeringFor) {
			answering[op.OrderID] = true
			answering[op.Replaces] = true
		}
	}
	var held int
	for i, orders := range gates {
		for id, h := range orders {
			if h.Released {
				continue
			}
			held++
			row, hasRow := dbs[i].Rows[id]
			order := id
			if o, ok := orderOf[id]; ok {
				order = o
			}
			switch {
			case hasRow && row.Held(), n.c.mode == modeKafka && !h.Pending, answering[order]:
				continue
			}
			var attempts []string
			for _, op := range OrderOps(ops, order) {
				attempts = append(attempts, op.String())
			}
			n.mu.Lock()
			n.stranded = append(n.stranded, fmt.Sprintf("%.1fs after %s: use of %s stranded in Redis by order %s of %s (reserved %s, pending %v, row %q), for which no attempt is being answered; its attempts:\n  %s",
				float64(strandCheckAfter)/1e9, f, codes[i], id, order, h.ReservedAt.Format("15:04:05.000"), h.Pending, row.Status, strings.Join(attempts, "\n  ")))
			n.mu.Unlock()
		}
	}
	n.noteCheck(fmt.Sprintf("%s: %d holds checked", f, held))
}

// overlapped reports whether a fault other than hang f may have left
// holds of its own at the check at now (history clock): a process fault
// that ended within strandQuiet, or a dependency fault that ended after f
// began.
func (n *nemesis) overlapped(f fault, now time.Duration) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range n.done {
		process := strings.HasSuffix(d.Kind, "-instance") || strings.HasSuffix(d.Kind, "-consumer")
		if process && d.End > now-strandQuiet || !process && d.End > f.Start {
			return true
		}
	}
	return false
}

// noteCheck records what a stranded check did, for the summary.
func (n *nemesis) noteCheck(s string) {
	n.mu.Lock()
	n.checks = append(n.checks, s)
	n.mu.Unlock()
}

// strandedUses returns what checkStranded found, and what each check did.
func (n *nemesis) strandedUses() (stranded, checks []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.stranded...), append([]string(nil), n.checks...)
}

// waitForWrites returns when reservations are being answered, or after a
// second: a stop then likely lands while a (combined) write commits.
func (n *nemesis) waitForWrites() {
	deadline := time.Now().Add(time.Second)
	before := reservesStarted(n.hist)
	for time.Now().Before(deadline) && reservesStarted(n.hist)-before < 4 {
		time.Sleep(2 * time.Millisecond)
	}
}

// reservesStarted counts the reservation attempts started so far.
func reservesStarted(h *History) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for i := range h.ops {
		if h.ops[i].Kind == Reserve {
			n++
		}
	}
	return n
}

func (n *nemesis) faults() []fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]fault(nil), n.done...)
}

// lockDep serialises faults of one dependency across nemeses.
func (c *cluster) lockDep(name string) {
	for {
		c.mu.Lock()
		if !c.down[name] {
			c.down[name] = true
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *cluster) unlockDep(name string) {
	c.mu.Lock()
	c.down[name] = false
	c.mu.Unlock()
}

// heal makes sure every process runs and none is paused, after the
// nemeses are done.
func (c *cluster) heal(t *testing.T) error {
	if c.kafka != nil {
		c.kafka.Resume(t)
	}
	for _, p := range append(append([]*proc(nil), c.instances...), c.consumer) {
		if p == nil {
			continue
		}
		p.resume()
		if !p.running() {
			if err := p.startUntilHealthy(90 * time.Second); err != nil {
				return err
			}
		}
	}
	return nil
}
