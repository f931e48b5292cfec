package voucher

import (
	"context"
	"slices"
	"sync"
	"time"
)

// A gate hold without a row is an orphan once it is older than the grace
// period, and reconciliation gives its use back (in Kafka mode with a
// fence, so a retry of its orderId is answered ORDER_RELEASED). Its age
// counts from its attempt's start (Hold.ReservedAt), yet a take whose gate
// call hung reaches the gate when the gate answers again: its hold can be
// past the grace period the moment it is written, while the instance that
// answered the attempt "nothing was taken" still settles it
// (settleUnanswered gives the use back and forgets the orderId, so that a
// retry takes afresh). Reconciliation therefore leaves a hold to a writer
// that still settles it (leaveToWriters), and gives back the rest as
// before.

// otherOwners returns the instances other than this one that own holds of
// the lists, each once.
func (s *Service) otherOwners(lists ...[]Hold) []string {
	var owners []string
	for _, holds := range lists {
		for _, h := range holds {
			if o := h.Owner; o != "" && o != s.cfg.Instance && !slices.Contains(owners, o) {
				owners = append(owners, o)
			}
		}
	}
	return owners
}

// ownersAlive reads which of owners have a live heartbeat (Gate.Alive);
// read is false when liveness could not be read, which is logged.
func (s *Service) ownersAlive(ctx context.Context, code string, owners []string) (alive map[string]bool, read bool) {
	if len(owners) == 0 {
		return nil, true
	}
	alive, err := s.gate.Alive(ctx, owners)
	if err != nil {
		s.log.WarnContext(ctx, "instance liveness not read; holds of gone instances wait for the grace period, and holds past it are given back",
			"code", code, "err", err)
		return nil, false
	}
	return alive, true
}

// leaveToWriters splits gate holds without a row past the grace period
// into the orphans to give back now and those left to their writer
// (reported in flight):
//   - a hold of this instance is left while this instance remembers its
//     attempt as unanswered (settleUnanswered settles it) or its durable
//     write as of unknown outcome (flashWrites.settles: settleUnknown
//     decides it with a fence);
//   - a hold of another instance with a live heartbeat (alive) is left
//     until this instance has seen it past its grace period for a grace
//     period more (orphanSightings): that instance's own settle comes
//     first, however late the hold reached the gate;
//   - a hold without an owner (an instance of the previous release), of an
//     instance without a live heartbeat, or whose owner's liveness could
//     not be read (alive nil), is an orphan.
func (s *Service) leaveToWriters(code string, holds []Hold, alive map[string]bool, now time.Time, grace time.Duration) (orphans, waiting []Hold) {
	for _, h := range holds {
		left := false
		switch {
		case h.Owner == "":
		case h.Owner == s.cfg.Instance:
			left = s.unanswered.remembers(code, h.OrderID, h.ReservedAt) || s.writes.settles(code, h.OrderID)
		case alive[h.Owner]:
			left = s.sightings.seenFor(sightingKey{code, h.OrderID, h.ReservedAt.UnixMilli()}, now, grace) < grace
		}
		if left {
			waiting = append(waiting, h)
		} else {
			orphans = append(orphans, h)
		}
	}
	return orphans, waiting
}

// maxSightings bounds the holds orphanSightings remembers; past it a hold
// not remembered counts as seen long ago and is given back as an orphan.
const maxSightings = 100_000

// sightingsPruneEvery is how often orphanSightings drops what it no longer
// needs.
const sightingsPruneEvery = time.Minute

// orphanSightings remembers when this instance's reconciliation first saw
// each hold of a live instance past its grace period without a row. A
// remembered hold is given back once it has been seen so for a grace
// period; one that is gone by then (its writer settled it, or another
// instance gave it back) is dropped after two grace periods and a minute.
// Safe for concurrent use.
type orphanSightings struct {
	mu     sync.Mutex
	seen   map[sightingKey]time.Time // guarded by mu
	pruned time.Time                 // guarded by mu
}

// sightingKey names one attempt's hold: the gate code, its orderId and its
// ReservedAt in Unix milliseconds, as the gate keeps it.
type sightingKey struct {
	code, orderID string
	reservedAt    int64
}

func newOrphanSightings() *orphanSightings {
	return &orphanSightings{seen: map[sightingKey]time.Time{}}
}

// seenFor returns how long before now the hold k was first seen, recording
// it as seen at now if it was not; a hold that cannot be recorded (the
// bound is reached) counts as seen long ago.
func (o *orphanSightings) seenFor(k sightingKey, now time.Time, grace time.Duration) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now.Sub(o.pruned) >= sightingsPruneEvery {
		o.pruned = now
		keep := 2*grace + time.Minute
		for s, at := range o.seen {
			if now.Sub(at) > keep {
				delete(o.seen, s)
			}
		}
	}
	at, ok := o.seen[k]
	switch {
	case ok:
		return now.Sub(at)
	case len(o.seen) >= maxSightings:
		return time.Duration(1<<63 - 1)
	}
	o.seen[k] = now
	return 0
}
