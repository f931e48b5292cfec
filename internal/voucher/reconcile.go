package voucher

import (
	"context"
	"sort"
	"time"
)

// ReconcileReport is what one reconciliation of a flash voucher found and
// did. Drift is RedisRemaining minus ExpectedRemaining: positive means the
// gate would hand out more than the database allows (repaired by adopting
// holds and clamping the counter), negative means undersell (repaired only
// by releasing specific orderIds, never by raising the counter). While the
// voucher changes under the reads, Drift is only what is certain whatever
// changed meanwhile, 0 when that is nothing (readDrift), and may then
// differ from RedisRemaining minus ExpectedRemaining.
type ReconcileReport struct {
	Code              string    `json:"code"`
	At                time.Time `json:"at"`
	Loaded            bool      `json:"loaded"`
	TotalLimit        int32     `json:"totalLimit"`
	DatabaseHeld      int32     `json:"databaseHeld"`
	RedisHeld         int64     `json:"redisHeld"`
	RedisRemaining    int64     `json:"redisRemaining"`
	ExpectedRemaining int64     `json:"expectedRemaining"`
	Drift             int64     `json:"drift"`
	// InFlight are gate holds without a database row that are younger than
	// the grace period: their write may still be coming.
	InFlight []string `json:"inFlight"`
	// Abandoned are gate holds without a database row, younger than the
	// grace period, taken by an instance whose heartbeat has been gone for
	// at least its TTL: nothing will write them. Repaired by fencing the orderId in the store (a
	// RELEASED row, so that a write still on its way takes nothing) and
	// releasing them in the gate; a retry is answered ORDER_RELEASED.
	Abandoned []string `json:"abandoned"`
	// Orphans are gate holds without a database row older than the grace
	// period; repaired by giving the use back (the orderId is forgotten, so
	// the client may retry it).
	Orphans []string `json:"orphans"`
	// Stale are gate holds whose row is RELEASED; repaired by releasing
	// them in the gate.
	Stale []string `json:"stale"`
	// Missing are held rows the gate does not know; repaired by adopting
	// them (the gate hands out less).
	Missing []string `json:"missing"`
	// Uncommitted are pending gate holds (Kafka mode) whose row exists;
	// repaired by marking them durable.
	Uncommitted []string `json:"uncommitted"`
	// Unconfirmed are gate holds (Kafka mode) whose row is CONFIRMED but
	// that the gate does not mark confirmed (the voucher was loaded while
	// the confirmation was being written); repaired by marking them, so
	// that no replacement takes them over.
	Unconfirmed []string `json:"unconfirmed"`
	// ClampedFrom is the counter before a clamp lowered it, when it did.
	ClampedFrom *int64 `json:"clampedFrom,omitempty"`
	// Repaired says whether repairs were applied (false for a dry run).
	Repaired bool `json:"repaired"`
	// Skipped explains repairs that were not safe to make now.
	Skipped string `json:"skipped,omitempty"`
	// The money budget, for a voucher with one: its amount, the discounts
	// of the held rows, the gate's counter, and BudgetDrift, the database's
	// minus the gate's (positive: the gate would give out more money than
	// the database allows; negative: less, or takes still on their way to
	// the store). Reported only: the gate never gives out more than its
	// own counter allows, and a reload (warm-up after Forget) resets it.
	BudgetAmount       int64 `json:"budgetAmount,omitempty"`
	DatabaseBudgetHeld int64 `json:"databaseBudgetHeld,omitempty"`
	RedisBudgetHeld    int64 `json:"redisBudgetHeld,omitempty"`
	BudgetDrift        int64 `json:"budgetDrift,omitempty"`
	// Windows lists the occurrences of the voucher's windows whose gate
	// counter differs from the uses PostgreSQL's held rows hold in them
	// (Drift: the database's minus the gate's, as BudgetDrift).
	Windows []WindowDrift `json:"windows,omitempty"`
	// RestoredCounters is how many occurrences' counters the gate had
	// lost (Lost) and the repair put back with the database's count. A
	// counter present is only reported: it moves with every take and
	// give-back, and a difference between reads of the two stores at two
	// moments may be a change in flight.
	RestoredCounters int `json:"restoredCounters,omitempty"`
}

// WindowDrift is one occurrence's counters in a ReconcileReport.
type WindowDrift struct {
	Start        time.Time `json:"start"`
	DatabaseHeld int64     `json:"databaseHeld"`
	RedisHeld    int64     `json:"redisHeld"`
	Drift        int64     `json:"drift"`
	// Lost: the gate has no counter for the occurrence.
	Lost bool `json:"lost,omitempty"`
}

// Consistent reports whether the report found nothing to repair or report.
func (r ReconcileReport) Consistent() bool {
	return r.Drift == 0 && !r.windowLost() && len(r.Abandoned) == 0 && len(r.Orphans) == 0 && len(r.Stale) == 0 && len(r.Missing) == 0 && len(r.Uncommitted) == 0 &&
		len(r.Unconfirmed) == 0
}

// Reconcile compares a flash voucher's gate state with the store and, when
// repair is set, makes the repairs that cannot oversell. grace is how old a
// gate hold without a row must be before it counts as an orphan. It
// compares chunk by chunk (compare.go), keeping in memory one chunk and
// what it finds, never the whole voucher.
func (s *Service) Reconcile(ctx context.Context, code string, repair bool, grace time.Duration) (rep ReconcileReport, err error) {
	rep = ReconcileReport{Code: code, At: s.now().UTC(), InFlight: []string{}, Abandoned: []string{}, Orphans: []string{},
		Stale: []string{}, Missing: []string{}, Uncommitted: []string{}, Unconfirmed: []string{}}
	if s.gate == nil {
		return rep, Unavailable(nil, "Redis is not configured")
	}
	if !ValidCode(code) {
		return rep, Errorf(CodeVoucherNotFound, "voucher %q not found", code)
	}
	pl := newPassLog(ctx, s.log, code, repair)
	defer func() { pl.done(ctx, &rep, err) }()
	pl.next("gateWalk")
	// The gate first, then the store, order by order: in both write modes
	// a use is taken in the gate before its row is written, so each
	// chunk of the gate's orders is looked up in the store after it was
	// read, and each page of the store's held rows in the gate after it
	// was read; every repair re-checks its order in one step
	// (docs/rules.md, "Reconciliation reads in chunks").
	c0, err := s.gate.Counts(ctx, code)
	if err != nil {
		return rep, err
	}
	cmp := comparison{s: s, code: code, grace: grace, pace: newPacer(s.cfg.ReconcileShare), found: map[string]Hold{}}
	var gl GateLimitCounts
	if c0.Loaded {
		if err := cmp.walkGate(ctx, &rep); err != nil {
			return rep, err
		}
		pl.next("gateCounts")
		if gl, err = s.gate.LimitCounts(ctx, code); err != nil {
			return rep, err
		}
	}
	pl.next("storeCounts")
	sc, err := s.store.ReconcileCounts(ctx, code)
	if err != nil {
		return rep, err
	}
	rep.TotalLimit = sc.TotalLimit
	rep.DatabaseHeld = sc.Held
	rep.ExpectedRemaining = int64(sc.TotalLimit) - int64(sc.Held)
	rep.Loaded = c0.Loaded
	if !c0.Loaded {
		return rep, nil
	}
	rep.RedisHeld = cmp.holding
	if c0.HeldCounted {
		rep.RedisHeld = c0.HeldCount
	}
	rep.RedisRemaining = c0.Remaining
	rep.Drift = c0.Remaining - rep.ExpectedRemaining
	pl.next("drift")
	if _, err := s.readDrift(ctx, code, &rep); err != nil {
		return rep, err
	}
	if sc.BudgetAmount > 0 {
		rep.BudgetAmount, rep.RedisBudgetHeld = sc.BudgetAmount, gl.BudgetHeld
		rep.DatabaseBudgetHeld = sc.BudgetHeld
		rep.BudgetDrift = rep.DatabaseBudgetHeld - rep.RedisBudgetHeld
	}
	rep.Windows = windowDrifts(sc.Windows, gl.Windows)

	pl.next("storeWalk")
	s.findAbandoned(ctx, &rep, cmp.found)
	if err := cmp.walkStore(ctx, &rep); err != nil {
		return rep, err
	}
	for _, l := range [][]string{rep.InFlight, rep.Abandoned, rep.Orphans, rep.Stale, rep.Missing, rep.Uncommitted, rep.Unconfirmed} {
		sort.Strings(l)
	}
	if !repair || rep.Consistent() {
		return rep, nil
	}
	rep.Repaired = true
	defer func() {
		pl.next("audit")
		s.auditReconcile(ctx, rep)
	}()
	pl.next("repairs")

	// Safe direction first: the gate learns of holds it lost.
	for _, id := range rep.Missing {
		r := cmp.missing[id]
		h := Hold{OrderID: id, CustomerID: r.CustomerID, OrderAmount: r.OrderAmount,
			DiscountAmount: r.DiscountAmount, ReservedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
			Confirmed: r.Status == StatusConfirmed, Code: campaignCodeOf(r.VoucherCode, Voucher{Code: code}), Window: r.Window}
		if r.HeldSince.Before(r.CreatedAt) {
			h.HeldSince = r.HeldSince
		}
		began := time.Now()
		_, err := s.gate.Adopt(ctx, code, h)
		pl.repaired(ctx, "adopt", id, began, err)
		if err != nil {
			return rep, err
		}
	}
	for _, id := range rep.Uncommitted {
		began := time.Now()
		_, err := s.gate.Commit(ctx, code, cmp.found[id])
		pl.repaired(ctx, "commit", id, began, err)
		if err != nil {
			return rep, err
		}
	}
	for _, id := range rep.Unconfirmed {
		began := time.Now()
		_, err := s.gate.Confirm(ctx, code, id, cmp.found[id].Code)
		pl.repaired(ctx, "confirm", id, began, err)
		if err != nil {
			return rep, err
		}
	}
	for _, id := range rep.Stale {
		began := time.Now()
		_, err := s.gate.Release(ctx, code, id, ReleaseMark)
		pl.repaired(ctx, "stale", id, began, err)
		if err != nil {
			return rep, err
		}
	}
	if len(rep.Orphans) > 0 || len(rep.Abandoned) > 0 {
		// In Kafka mode a hold without a row may still be an event in the
		// topic, acknowledged and answered 201: give it back only once the
		// consumer has caught up.
		if err := s.writes.caughtUp(ctx); err != nil {
			rep.Skipped = "orphan holds kept: " + err.Error()
		}
		if rep.Skipped == "" {
			for _, id := range rep.Orphans {
				began := time.Now()
				err := s.writes.giveBackOrphan(ctx, code, cmp.found[id])
				pl.repaired(ctx, "orphan", id, began, err)
				if err != nil {
					return rep, err
				}
			}
			for _, id := range rep.Abandoned {
				began := time.Now()
				_, err := s.fenceHold(ctx, code, cmp.found[id])
				pl.repaired(ctx, "abandoned", id, began, err)
				if err != nil {
					return rep, err
				}
			}
		}
	}
	if lost := rep.lostWindows(); len(lost) > 0 {
		if rep.RestoredCounters, err = s.gate.RestoreWindows(ctx, code, lost); err != nil {
			return rep, err
		}
	}
	began := time.Now()
	before, after, err := s.gate.Clamp(ctx, code, sc.TotalLimit)
	pl.repaired(ctx, "clamp", "", began, err)
	if err != nil {
		return rep, err
	}
	if after < before {
		rep.ClampedFrom = &before
	}
	return rep, nil
}

// findAbandoned moves from rep.InFlight to rep.Abandoned the holds whose
// owner is another instance with no live heartbeat for a while
// (confirmedDead). This instance's own
// holds are in flight here or settled by SettleUnknown; holds without an
// owner wait for the grace period. When liveness cannot be read, every
// hold stays in flight.
func (s *Service) findAbandoned(ctx context.Context, rep *ReconcileReport, holds map[string]Hold) {
	var owners []string
	seen := map[string]bool{}
	for _, id := range rep.InFlight {
		if o := holds[id].Owner; o != "" && o != s.cfg.Instance && !seen[o] {
			seen[o] = true
			owners = append(owners, o)
		}
	}
	if len(owners) == 0 {
		return
	}
	alive, err := s.gate.Alive(ctx, owners)
	if err != nil {
		s.log.WarnContext(ctx, "instance liveness not read; holds of gone instances wait for the grace period", "code", rep.Code, "err", err)
		return
	}
	dead := s.absent.confirmedDead(owners, alive, s.now(), s.cfg.HeartbeatTTL)
	inFlight := rep.InFlight[:0]
	for _, id := range rep.InFlight {
		if o := holds[id].Owner; dead[o] {
			rep.Abandoned = append(rep.Abandoned, id)
			continue
		}
		inFlight = append(inFlight, id)
	}
	rep.InFlight = inFlight
}

// ReconcileAll reconciles every flash voucher that has not ended more than
// keep ago and returns the reports.
func (s *Service) ReconcileAll(ctx context.Context, repair bool, grace, keep time.Duration) ([]ReconcileReport, error) {
	codes, err := s.store.FlashVouchers(ctx, s.now().Add(-keep))
	if err != nil {
		return nil, err
	}
	reports := make([]ReconcileReport, 0, len(codes))
	for _, code := range codes {
		rep, err := s.Reconcile(ctx, code, repair, grace)
		if err != nil {
			return reports, err
		}
		reports = append(reports, rep)
	}
	return reports, nil
}

// windowLost reports whether the gate lost the counter of an occurrence
// whose uses the database holds.
func (r ReconcileReport) windowLost() bool { return len(r.lostWindows()) > 0 }

// lostWindows are the occurrences whose counter the gate lost, with the
// database's count.
func (r ReconcileReport) lostWindows() map[time.Time]int64 {
	var out map[time.Time]int64
	for _, w := range r.Windows {
		if w.Lost && w.DatabaseHeld > 0 {
			if out == nil {
				out = map[time.Time]int64{}
			}
			out[w.Start] = w.DatabaseHeld
		}
	}
	return out
}

// windowDrifts lists the occurrences whose counts differ, sorted by start.
func windowDrifts(db, gate map[time.Time]int64) []WindowDrift {
	var out []WindowDrift
	seen := map[time.Time]bool{}
	for _, m := range []map[time.Time]int64{db, gate} {
		for w := range m {
			if seen[w] || db[w] == gate[w] {
				continue
			}
			seen[w] = true
			_, kept := gate[w]
			out = append(out, WindowDrift{Start: w, DatabaseHeld: db[w], RedisHeld: gate[w], Drift: db[w] - gate[w], Lost: !kept})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}
