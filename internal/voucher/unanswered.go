package voucher

import (
	"context"
	"errors"
	"sync"
	"time"
)

// unansweredTakes remembers this instance's takes whose gate call got no
// answer (ErrGateUnanswered), and give-backs that failed, until
// settleUnanswered settles them once the gate answers again: a use such a
// call took is given back unless a row holds it, and a take still on its
// way to the gate is voided (Gate.Void). Entries are kept per attempt (an
// orderId's retries that hung too have their own), bounded by
// maxUnanswered.
type unansweredTakes struct {
	mu sync.Mutex
	m  map[orderKey][]unansweredTake // guarded by mu
	n  int                           // entries in m; guarded by mu
}

// unansweredTake is one attempt, named by its hold (OrderID and
// ReservedAt), remembered at since.
type unansweredTake struct {
	code  string
	hold  Hold
	since time.Time
}

// maxUnanswered bounds the attempts remembered; past it an attempt is not
// remembered and its answer says that its outcome is unknown
// (reconciliation gives its use back after its grace period).
const maxUnanswered = 100_000

// unansweredSettleDelay is how long an attempt is left to a retry of its
// orderId (which finds its hold and completes it) before it is settled.
const unansweredSettleDelay = time.Second

func newUnansweredTakes() *unansweredTakes {
	return &unansweredTakes{m: map[orderKey][]unansweredTake{}}
}

// remember records hold's attempt, taken under code, at now; false when
// the bound is reached and it was not recorded.
func (u *unansweredTakes) remember(code string, hold Hold, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := orderKey{code, hold.OrderID}
	for _, t := range u.m[k] {
		if t.hold.ReservedAt.Equal(hold.ReservedAt) {
			return true
		}
	}
	if u.n >= maxUnanswered {
		return false
	}
	u.m[k] = append(u.m[k], unansweredTake{code: code, hold: hold, since: now})
	u.n++
	return true
}

// claim removes and reports the attempt of orderID under code whose hold
// was reserved at reservedAt: the caller completes it (a retry that found
// its hold), and settleUnanswered will not touch it.
func (u *unansweredTakes) claim(code, orderID string, reservedAt time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := orderKey{code, orderID}
	ts := u.m[k]
	for i, t := range ts {
		if t.hold.ReservedAt.Equal(reservedAt) {
			u.drop(k, append(ts[:i:i], ts[i+1:]...))
			return true
		}
	}
	return false
}

// due removes and returns the attempts remembered at least delay before
// now.
func (u *unansweredTakes) due(now time.Time, delay time.Duration) []unansweredTake {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []unansweredTake
	for k, ts := range u.m {
		var keep []unansweredTake
		for _, t := range ts {
			if now.Sub(t.since) >= delay {
				out = append(out, t)
			} else {
				keep = append(keep, t)
			}
		}
		u.drop(k, keep)
	}
	return out
}

// putBack remembers again attempts that due returned and that could not be
// settled, keeping their times.
func (u *unansweredTakes) putBack(ts []unansweredTake) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, t := range ts {
		k := orderKey{t.code, t.hold.OrderID}
		u.m[k] = append(u.m[k], t)
		u.n++
	}
}

// drop replaces k's attempts with keep; u.mu is held.
func (u *unansweredTakes) drop(k orderKey, keep []unansweredTake) {
	u.n += len(keep) - len(u.m[k])
	if len(keep) == 0 {
		delete(u.m, k)
		return
	}
	u.m[k] = keep
}

// unansweredTake remembers a take of hold under code that failed with err,
// when err says the take may have run (ErrGateUnanswered). It reports
// whether the answer may still say that nothing stays taken: true when the
// take surely did not run or is remembered and will be settled.
func (d *deps) unansweredTake(ctx context.Context, code string, hold Hold, err error) bool {
	if !errors.Is(err, ErrGateUnanswered) {
		return true
	}
	if d.unanswered.remember(code, hold, d.now()) {
		d.log.WarnContext(ctx, "gate did not answer a take; it is settled once the gate answers again",
			"code", code, "orderId", hold.OrderID, "err", err)
		return true
	}
	d.log.ErrorContext(ctx, "gate did not answer a take and too many are unsettled; reconciliation gives its use back",
		"code", code, "orderId", hold.OrderID, "err", err)
	return false
}

// settleParallel is how many attempts settleUnanswered settles at once,
// so that a hang's worth of them is settled within about a second.
const settleParallel = 8

// settleUnanswered settles the remembered attempts older than
// unansweredSettleDelay, each with Gate.Void: an attempt the gate never
// saw is voided (its take, should it arrive, takes nothing); a hold this
// attempt took is settled with fence (fenceHold: kept when the store has
// the order's row, which a retry wrote, else fenced and given back); a
// hold another attempt of the orderId took, or a released one, is left
// alone. Attempts it could not settle (the gate or the store does not
// answer yet) are kept for the next call, with the first error; it
// returns how many it settled.
func (d *deps) settleUnanswered(ctx context.Context, fence func(context.Context, string, Hold) (bool, error)) (int, error) {
	due := d.unanswered.due(d.now(), unansweredSettleDelay)
	if len(due) == 0 {
		return 0, nil
	}
	var (
		mu     sync.Mutex
		failed []unansweredTake
		first  error
		wg     sync.WaitGroup
	)
	next := make(chan unansweredTake)
	for range min(settleParallel, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range next {
				if err := d.settleAttempt(ctx, t, fence); err != nil {
					mu.Lock()
					failed = append(failed, t)
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, t := range due {
		next <- t
	}
	close(next)
	wg.Wait()
	d.unanswered.putBack(failed)
	return len(due) - len(failed), first
}

// settleAttempt settles one remembered attempt (settleUnanswered).
func (d *deps) settleAttempt(ctx context.Context, t unansweredTake, fence func(context.Context, string, Hold) (bool, error)) error {
	stored, found, err := d.gate.Void(ctx, t.code, t.hold)
	switch {
	case err != nil:
		return err
	case !found:
		d.log.InfoContext(ctx, "unanswered take voided before it reached the gate", "code", t.code, "orderId", t.hold.OrderID)
		return nil
	case stored.Released || !stored.ReservedAt.Equal(t.hold.ReservedAt):
		// Released, or another attempt's hold: its writer settles it.
		return nil
	}
	_, err = fence(ctx, t.code, stored)
	return err
}
