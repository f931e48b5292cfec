package voucher

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// DefaultHeartbeatTTL is the default of ServiceConfig.HeartbeatTTL: an
// instance silent for this long counts as gone, and the holds it took
// without writing them are fenced and given back (Reconcile).
const DefaultHeartbeatTTL = 3 * time.Second

// absentInstances records, per instance id seen without a live
// heartbeat, when that was first seen.
type absentInstances struct {
	mu    sync.Mutex
	since map[string]time.Time // guarded by mu
}

// confirmedDead returns those of instances that have had no live heartbeat
// (alive) at every look for at least ttl, at now. A heartbeat key can
// vanish while its instance lives: Redis restarted empty, or the instance
// stalled for a moment; a live instance beats again within a third of the
// TTL, so one absent look proves nothing. Instances seen alive are
// forgotten.
func (a *absentInstances) confirmedDead(instances []string, alive map[string]bool, now time.Time, ttl time.Duration) map[string]bool {
	dead := map[string]bool{}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range instances {
		if alive[id] {
			delete(a.since, id)
			continue
		}
		since, seen := a.since[id]
		if !seen {
			a.since[id] = now
			continue
		}
		if now.Sub(since) >= ttl {
			dead[id] = true
		}
	}
	return dead
}

// keepOnly forgets every instance but those of absent: the others are
// alive, or were recovered and removed from the registry.
func (a *absentInstances) keepOnly(absent []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range a.since {
		if !slices.Contains(absent, id) {
			delete(a.since, id)
		}
	}
}

// forget drops instances from the absent ones (they were recovered and
// removed from the registry).
func (a *absentInstances) forget(instances []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range instances {
		delete(a.since, id)
	}
}

// validInstance reports whether id may name an instance: it is stored in
// gate holds and keys, so only 1-64 letters, digits, '-' and '_'.
func validInstance(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Heartbeat tells the gate that this instance is alive for HeartbeatTTL.
func (s *Service) Heartbeat(ctx context.Context) error {
	if s.gate == nil {
		return nil
	}
	return s.gate.Beat(ctx, s.cfg.Instance, s.cfg.HeartbeatTTL)
}

// SettleUnknown decides this instance's writes whose outcome was unknown
// at least a second ago and that no retry has settled since. In both flash
// modes, the takes and give-backs the gate did not answer
// (settleUnanswered): a use one took is given back unless the store has
// the order's row, and a take the gate never saw is voided there; and in
// Kafka mode the reservations whose event was not acknowledged in time,
// fenced (fenceHold) once the consumer has applied what the broker
// acknowledged. The
// flash-sync orders whose durable write ended with an unknown outcome are
// fenced in the store (fenceHold): the row the write committed is found
// and the gate keeps its use, or a RELEASED row makes sure a write still
// on its way takes nothing and the gate's use is given back. It returns
// how many it settled; those it could not settle (the store or the gate is
// still down) stay for the next call.
func (s *Service) SettleUnknown(ctx context.Context) (int, error) {
	if s.writes == nil {
		return 0, nil
	}
	n, err := s.settleUnanswered(ctx, s.fenceHold)
	m, werr := s.writes.settleUnknown(ctx, s.fenceHold)
	return n + m, errors.Join(err, werr)
}

// fenceHold settles a gate hold whose writer is done or gone: the store
// gets a RELEASED row for the orderId unless it has one (Store.AbandonOrder,
// which waits for a write of the orderId still in progress), so nothing
// written later can take a use for it. kept reports that the orderId's
// reservation is in the store after all and the hold stands; otherwise the
// use is given back in the gate and the orderId marked released (or
// forgotten when its row belongs to another voucher or customer, whose
// retry is an ORDER_CONFLICT anyway). In flash-sync mode a replacement of
// an order the store has CONFIRMED is undone in the gate instead, without a
// fence (flashWrites.undone).
//
// A replacement's hold (h.Replaces) took its use over from the replaced
// order. A replaced single is released by the fence (Store.AbandonOrder),
// as the gate has answered it since the move. A replaced stack member is
// not: the fence would release that member alone and leave its stack
// partly held. It is fenced as a hold of its own instead, and the use goes
// back to the replaced member (Gate.Unreplace) while the store still holds
// that, else to the voucher; either way the gate then counts what the
// store holds.
//
// A pending hold of another instance (Kafka mode: its writer stopped
// answering while it waited for the broker) is first taken over in the gate
// (Gate.TakeOver): its writer, should it resume, can then no longer commit
// it and answer 201 between the store's fence and the gate's release. A hold
// its writer made durable first stands (kept): its event is in the log.
func (s *Service) fenceHold(ctx context.Context, code string, h Hold) (kept bool, err error) {
	if undone, err := s.writes.undone(ctx, code, h); err != nil || undone {
		return false, err
	}
	takenOver := false
	if h.Pending && h.Owner != "" && h.Owner != s.cfg.Instance {
		taken, err := s.gate.TakeOver(ctx, code, h, s.cfg.Instance)
		switch {
		case err != nil:
			return false, err
		case taken == GateHoldDurable:
			return true, nil
		}
		takenOver = taken == GateTakenOver
		h.Owner = s.cfg.Instance
	}
	fence, member := h, false
	if h.Replaces != "" {
		if _, member, err = s.store.StackOf(ctx, h.Replaces); err != nil {
			return false, err
		}
		if member {
			fence.Replaces = ""
		}
	}
	row, inserted, err := s.store.AbandonOrder(ctx, code, fence, s.now())
	if err != nil {
		return false, err
	}
	mode := ReleaseMark
	switch {
	case inserted:
	case row.VoucherCode == code && row.CustomerID == h.CustomerID:
		if row.Status.Held() {
			if takenOver {
				// Its event reached the store: the hold taken over is
				// made durable, as its writer would have.
				_, err := s.gate.Commit(ctx, code, h)
				return err == nil, err
			}
			return true, nil
		}
	default:
		mode = ReleaseForget
	}
	if member {
		back, err := s.replacedHeld(ctx, h.Replaces)
		if err != nil {
			return false, err
		}
		if back {
			if _, err := s.gate.Unreplace(ctx, code, h.OrderID, h.Replaces); err != nil {
				return false, err
			}
			s.log.WarnContext(ctx, "replacement settled without its writer: fenced in the store, the use back with the replaced stack member",
				"code", code, "orderId", h.OrderID, "owner", h.Owner, "fenced", inserted, "replaces", h.Replaces)
			return false, nil
		}
	}
	if _, err := s.gate.Release(ctx, code, h.OrderID, mode); err != nil {
		return false, err
	}
	s.log.WarnContext(ctx, "gate hold settled without its writer: fenced in the store and given back",
		"code", code, "orderId", h.OrderID, "owner", h.Owner, "fenced", inserted, "replaces", h.Replaces)
	return false, nil
}

// replacedHeld reports whether the store holds orderID (RESERVED or
// CONFIRMED); false when it does not know it.
func (s *Service) replacedHeld(ctx context.Context, orderID string) (bool, error) {
	row, err := s.store.Order(ctx, orderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return row.Status.Held(), nil
}

// RecoverDead looks for registered instances whose heartbeat has expired
// and stayed so (confirmedDead) and, if there are any, reconciles every flash voucher with repairs on, so
// that the holds they took without writing them are fenced and given back
// at once instead of after the grace period (Reconcile). The dead
// instances are then dropped from the registry, unless a repair was
// skipped (Kafka consumer behind): then the next call tries again. It
// returns the instances it recovered.
func (s *Service) RecoverDead(ctx context.Context, grace, keep time.Duration) ([]string, error) {
	if s.gate == nil {
		return nil, nil
	}
	absent, err := s.gate.DeadInstances(ctx)
	if err != nil {
		return nil, err
	}
	// Every registered instance not absent now is alive: its absence, if
	// one was seen, is over.
	s.absent.keepOnly(absent)
	confirmed := s.absent.confirmedDead(absent, nil, s.now(), s.cfg.HeartbeatTTL)
	var dead []string
	for _, id := range absent {
		if confirmed[id] {
			dead = append(dead, id)
		}
	}
	if len(dead) == 0 {
		return nil, nil
	}
	reports, err := s.ReconcileAll(ctx, true, grace, keep)
	if err != nil {
		return nil, err
	}
	for _, r := range reports {
		if r.Skipped != "" {
			return nil, nil
		}
	}
	for _, id := range dead {
		if err := s.gate.ForgetInstance(ctx, id); err != nil {
			return nil, err
		}
	}
	s.absent.forget(dead)
	s.log.WarnContext(ctx, "instances gone; their holds reconciled", "instances", dead)
	return dead, nil
}
