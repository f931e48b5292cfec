package voucher

import (
	"context"
	"slices"
	"time"
)

// DefaultHeartbeatTTL is the default of ServiceConfig.HeartbeatTTL: an
// instance silent for this long counts as gone, and the holds it took
// without writing them are fenced and given back (Reconcile).
const DefaultHeartbeatTTL = 3 * time.Second

// settleDelay is how long an order whose write had an unknown outcome is
// left to the client's retry before SettleUnknown decides it.
const settleDelay = time.Second

// confirmedDead returns those of instances that have had no live heartbeat
// (alive) at every look for at least HeartbeatTTL. A heartbeat key can
// vanish while its instance lives: Redis restarted empty, or the instance
// stalled for a moment; a live instance beats again within a third of the
// TTL, so one absent look proves nothing. Instances seen alive are
// forgotten.
func (s *Service) confirmedDead(instances []string, alive map[string]bool) map[string]bool {
	now := s.cfg.Clock()
	dead := map[string]bool{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range instances {
		if alive[id] {
			delete(s.absentSince, id)
			continue
		}
		since, seen := s.absentSince[id]
		if !seen {
			s.absentSince[id] = now
			continue
		}
		if now.Sub(since) >= s.cfg.HeartbeatTTL {
			dead[id] = true
		}
	}
	return dead
}

// forgetAbsent drops instances from the absent ones (they were recovered
// and removed from the registry).
func (s *Service) forgetAbsent(instances []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range instances {
		delete(s.absentSince, id)
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

// SettleUnknown decides the flash-sync orders whose durable write ended
// with an unknown outcome at least settleDelay ago and that no retry has
// settled since. It fences each in the store (fenceHold): the row the write
// committed is found and the gate keeps its use, or a RELEASED row makes
// sure a write still on its way takes nothing and the gate's use is given
// back. It returns how many it settled; orders it could not settle (the
// store is still down) stay for the next call.
func (s *Service) SettleUnknown(ctx context.Context) (int, error) {
	s.mu.Lock()
	due := make(map[orderKey]Hold, len(s.unsettled))
	now := s.cfg.Clock()
	for k, u := range s.unsettled {
		if now.Sub(u.since) >= settleDelay {
			due[k] = u.hold
		}
	}
	s.mu.Unlock()
	n := 0
	for k, h := range due {
		if _, err := s.fenceHold(ctx, k.code, h); err != nil {
			return n, err
		}
		s.settled(k.code, k.orderID)
		n++
	}
	return n, nil
}

// undoReplacementOfConfirmed settles a replacement's hold (h.Replaces)
// whose replaced order is CONFIRMED in the store without a fence: such a
// replacement was never written and never will be (the store replaces only
// a RESERVED hold, releasing it, and a released order is never confirmed), so
// its use goes back to the replaced order in the gate, as after a refused
// write, and a retry of the orderId is decided afresh
// (REPLACED_ORDER_NOT_HELD) instead of meeting a RELEASED fence. It
// reports whether it did; an unknown or unconfirmed replaced order is left
// to the fence, which a replacement that did succeed needs. Kafka mode
// never gets here: its replacements are answered once their event is
// acknowledged, and the consumer decides them.
func (s *Service) undoReplacementOfConfirmed(ctx context.Context, code string, h Hold) (bool, error) {
	if h.Replaces == "" {
		return false, nil
	}
	row, err := s.store.Order(ctx, h.Replaces)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return false, nil
	case err != nil:
		return false, err
	case row.Status != StatusConfirmed:
		return false, nil
	}
	cctx, cancel := s.writeContext(ctx)
	defer cancel()
	if _, err := s.gate.Unreplace(cctx, code, h.OrderID, h.Replaces); err != nil {
		return false, err
	}
	s.log.WarnContext(ctx, "unsettled replacement of a confirmed order undone: the replaced hold stands again",
		"code", code, "orderId", h.OrderID, "replaces", h.Replaces)
	return true, nil
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
// fence (undoReplacementOfConfirmed).
func (s *Service) fenceHold(ctx context.Context, code string, h Hold) (kept bool, err error) {
	if s.cfg.FlashWrites != FlashKafka {
		if undone, err := s.undoReplacementOfConfirmed(ctx, code, h); err != nil || undone {
			return false, err
		}
	}
	row, inserted, err := s.store.AbandonOrder(ctx, code, h, s.cfg.Clock())
	if err != nil {
		return false, err
	}
	mode := ReleaseMark
	switch {
	case inserted:
	case row.VoucherCode == code && row.CustomerID == h.CustomerID:
		if row.Status.Held() {
			return true, nil
		}
	default:
		mode = ReleaseForget
	}
	if _, err := s.gate.Release(ctx, code, h.OrderID, mode); err != nil {
		return false, err
	}
	s.log.WarnContext(ctx, "gate hold settled without its writer: fenced in the store and given back",
		"code", code, "orderId", h.OrderID, "owner", h.Owner, "fenced", inserted, "replaces", h.Replaces)
	return false, nil
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
	s.mu.Lock()
	for id := range s.absentSince {
		if !slices.Contains(absent, id) {
			delete(s.absentSince, id)
		}
	}
	s.mu.Unlock()
	confirmed := s.confirmedDead(absent, nil)
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
	s.forgetAbsent(dead)
	s.log.WarnContext(ctx, "instances gone; their holds reconciled", "instances", dead)
	return dead, nil
}
