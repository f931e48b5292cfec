package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
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
)

// faultsFor lists the faults that apply to a mode. Client timeouts and
// retries are not listed: the workload injects them all along.
func faultsFor(mode string) []string {
	f := []string{faultKillInstance, faultPauseInstance, faultKillPostgres, faultStopPostgres, faultImmediatePostgres, faultKillRedis}
	if mode == modeKafka {
		f = append(f, faultKillKafka, faultKillConsumer, faultPauseConsumer)
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
	mu   sync.Mutex
	done []fault
}

// run injects faults in order; it stops early when ctx ends (the fault in
// progress is still healed).
func (n *nemesis) run(ctx context.Context, faults []fault) {
	for _, f := range faults {
		if !waitCtx(ctx, f.Gap) {
			return
		}
		f.Start = time.Duration(n.hist.Since())
		if err := n.inject(f); err != nil {
			f.Err = err.Error()
		}
		f.End = time.Duration(n.hist.Since())
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
	default:
		return fmt.Errorf("unknown fault %q", f.Kind)
	}
	return nil
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
