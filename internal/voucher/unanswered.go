package voucher

import (
	"cmp"
	"context"
	"errors"
	"slices"
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

// unansweredTake is one call whose answer was lost, remembered at since:
// what it was is its kind.
type unansweredTake struct {
	code  string
	hold  Hold
	since time.Time
	kind  unansweredKind
}

// unansweredKind says what an unansweredTake was.
type unansweredKind int

const (
	// lostTake is a take (or a give-back) of the attempt hold names (its
	// OrderID and ReservedAt) that the gate did not answer.
	lostTake unansweredKind = iota
	// lostRelease is a release of hold.OrderID whose store call failed
	// while it may have committed: the gate's use is given back once the
	// store shows the order RELEASED.
	lostRelease
	// lostEvent is a reservation event of hold (Kafka mode) whose
	// acknowledgement did not come in time: the event may still land.
	lostEvent
)

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
	return u.add(unansweredTake{code: code, hold: hold, since: now})
}

// rememberRelease records a release of orderID (a campaign's with its
// campaign code) under code whose store call failed at now; false when
// the bound is reached.
func (u *unansweredTakes) rememberRelease(code, campaignCode, orderID string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.add(unansweredTake{code: code, hold: Hold{OrderID: orderID, Code: campaignCode}, since: now, kind: lostRelease})
}

// rememberEvent records hold's reservation event, published under code,
// whose acknowledgement did not come by now; false when the bound is
// reached.
func (u *unansweredTakes) rememberEvent(code string, hold Hold, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.add(unansweredTake{code: code, hold: hold, since: now, kind: lostEvent})
}

// add records t unless an equal entry is there; u.mu is held.
func (u *unansweredTakes) add(t unansweredTake) bool {
	k := orderKey{t.code, t.hold.OrderID}
	for _, o := range u.m[k] {
		if o.kind == t.kind && o.hold.ReservedAt.Equal(t.hold.ReservedAt) {
			return true
		}
	}
	if u.n >= maxUnanswered {
		return false
	}
	u.m[k] = append(u.m[k], t)
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
		if t.kind == lostTake && t.hold.ReservedAt.Equal(reservedAt) {
			u.drop(k, append(ts[:i:i], ts[i+1:]...))
			return true
		}
	}
	return false
}

// remembers reports whether a take or an event of the attempt of orderID
// under code whose hold was reserved at reservedAt is remembered, still to
// be settled.
func (u *unansweredTakes) remembers(code, orderID string, reservedAt time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.ContainsFunc(u.m[orderKey{code, orderID}], func(t unansweredTake) bool {
		return t.kind != lostRelease && t.hold.ReservedAt.Equal(reservedAt)
	})
}

// due removes and returns the entries remembered at least delay before
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

// settleUnanswered settles the remembered calls older than
// unansweredSettleDelay (settleAttempt, settleRelease, settleEvent), each
// within the write timeout, so that a dependency that still hangs holds
// up only its own. Those it could not settle (the gate, the store or the
// broker does not answer yet) are kept for the next call, with the first
// error; it returns how many it settled.
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
	fail := func(t unansweredTake, err error) {
		mu.Lock()
		failed = append(failed, t)
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	// Lost events last, and the broker asked once, when the first comes:
	// a broker that still hangs holds up no other entry.
	slices.SortStableFunc(due, func(a, b unansweredTake) int {
		return cmp.Compare(boolInt(a.kind == lostEvent), boolInt(b.kind == lostEvent))
	})
	eventsApplied := sync.OnceValue(func() error { return d.eventsApplied(ctx) })
	next := make(chan unansweredTake)
	for range min(settleParallel, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range next {
				if t.kind == lostEvent {
					if err := eventsApplied(); err != nil {
						fail(t, err)
						continue
					}
				}
				if err := d.settleOne(ctx, t, fence); err != nil {
					fail(t, err)
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

// eventsApplied returns nil when the consumer has applied every event
// acknowledged so far: the broker answers again, and a lost event that
// landed meanwhile has its row.
func (d *deps) eventsApplied(ctx context.Context) error {
	cctx, cancel := d.writeContext(ctx)
	defer cancel()
	return d.events.CaughtUp(cctx)
}

// boolInt is 1 for true, 0 for false.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// settleOne settles one remembered call by its kind, within the write
// timeout.
func (d *deps) settleOne(ctx context.Context, t unansweredTake, fence func(context.Context, string, Hold) (bool, error)) error {
	ctx, cancel := d.writeContext(ctx)
	defer cancel()
	switch t.kind {
	case lostRelease:
		return d.settleRelease(ctx, t)
	case lostEvent:
		return d.settleEvent(ctx, t, fence)
	}
	return d.settleAttempt(ctx, t)
}

// settleEvent settles a reservation whose event was not acknowledged in
// time, once the consumer has applied every event acknowledged since
// (eventsApplied): with fence (fenceHold), as the liveness path settles a
// dead instance's holds. The order's row is found (the event landed) and
// the hold is made durable in the gate, or a RELEASED row makes sure that
// the event, should it still land, takes nothing, and the use is given
// back. A hold of the orderId the gate took at another time (a retry's,
// after the gate lost this one: Redis restarted, the voucher loaded again
// without the order) is that attempt's, whose event may be on its way and
// whose 201 may be answered: the fence, which acts on the orderId, would
// release it, so the settle leaves it to that attempt.
func (d *deps) settleEvent(ctx context.Context, t unansweredTake, fence func(context.Context, string, Hold) (bool, error)) error {
	cur, found, err := d.gate.Lookup(ctx, t.code, t.hold.OrderID)
	switch {
	case err != nil:
		return err
	case found && !cur.ReservedAt.Equal(t.hold.ReservedAt):
		d.log.InfoContext(ctx, "unacknowledged event superseded by a later take of its orderId; left to that take",
			"code", t.code, "orderId", t.hold.OrderID)
		return nil
	}
	kept, err := fence(ctx, t.code, t.hold)
	if err != nil || !kept {
		return err
	}
	_, err = d.gate.Commit(ctx, t.code, t.hold)
	return err
}

// settleAttempt settles one remembered attempt with Gate.Void. An attempt
// the gate never saw is voided: its take, should it arrive, takes nothing.
// A hold another attempt of the orderId took, or a released one, is left
// to its own writer. A hold this attempt took stands when the store has
// the order's row (a retry completed it); otherwise its use is given back
// and the orderId forgotten (a replacement's goes back to the order it
// replaced), as after a write that provably failed, so that a retry of the
// orderId takes afresh: nothing was written for it, and nothing will be
// (in sync mode only a retry writes it; in Kafka mode nothing was
// published, and a retry on this instance that publishes it claims the
// attempt first, which takes it out of the settle). A row RELEASED (a
// retry elsewhere fenced it) marks the hold released.
func (d *deps) settleAttempt(ctx context.Context, t unansweredTake) error {
	stored, found, err := d.gate.Void(ctx, t.code, t.hold)
	switch {
	case err != nil:
		return err
	case !found:
		d.log.InfoContext(ctx, "unanswered take voided before it reached the gate", "code", t.code, "orderId", t.hold.OrderID)
		return nil
	case stored.Released || !stored.ReservedAt.Equal(t.hold.ReservedAt):
		return nil
	}
	row, err := d.store.Order(ctx, stored.OrderID)
	ours := err == nil && row.VoucherCode == stored.CodeOr(t.code) && row.CustomerID == stored.CustomerID
	switch {
	case err != nil && !IsCode(err, CodeReservationNotFound):
		return err
	case ours && row.Status.Held():
		return nil
	case ours && row.Status == StatusReleased:
		_, err := d.gate.Release(ctx, t.code, stored.OrderID, ReleaseMark)
		return err
	}
	if stored.Replaces != "" {
		_, err = d.gate.Unreplace(ctx, t.code, stored.OrderID, stored.Replaces)
	} else {
		_, err = d.gate.Release(ctx, t.code, stored.OrderID, ReleaseForget)
	}
	if err == nil {
		d.log.WarnContext(ctx, "unanswered take settled: its use given back to the gate", "code", t.code,
			"orderId", stored.OrderID, "replaces", stored.Replaces)
	}
	return err
}

// settleRelease settles a release whose store call failed: when the store
// has the order RELEASED (the call committed after all, or a retry did),
// the gate's use is given back, as the release would have done.
func (d *deps) settleRelease(ctx context.Context, t unansweredTake) error {
	row, err := d.store.Redemption(ctx, t.hold.CodeOr(t.code), t.hold.OrderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return nil
	case err != nil:
		return err
	case row.Status != StatusReleased:
		return nil
	}
	given, err := d.gate.Release(ctx, t.code, t.hold.OrderID, ReleaseMark)
	if given {
		d.log.WarnContext(ctx, "release whose answer was lost settled: its use given back to the gate", "code", t.code, "orderId", t.hold.OrderID)
	}
	return err
}
