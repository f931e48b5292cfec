package voucher

import (
	"context"
	"slices"
	"sort"
	"strconv"
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
	// The lists below name at most ServiceConfig.ReconcileFindings orders
	// each (default MaxFindings), sorted; Found counts every finding of
	// each kind, and Truncated says whether some finding is counted but
	// not named. A repairing pass repairs every finding, named or not.
	Found     FindingCounts `json:"found"`
	Truncated bool          `json:"truncated"`
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
	// Missing are held rows the gate does not know, and (Kafka mode)
	// CONFIRMED rows the gate marks released; repaired by adopting them
	// (the gate hands out less).
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
	// DatabaseRows is how many held rows (RESERVED and CONFIRMED) the
	// store's walk read. RowsChecked says whether the walk was quiet enough
	// to compare the store's counters with those rows (checkCounters);
	// CounterDrifts lists the counters that then differ.
	DatabaseRows  int64          `json:"databaseRows"`
	RowsChecked   bool           `json:"rowsChecked"`
	CounterDrifts []CounterDrift `json:"counterDrifts,omitempty"`
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

// FindingCounts counts a reconciliation's findings of each kind, named or
// not in the report's lists. An order the gate's scan returns twice (HSCAN
// may, while Redis resizes the hash) or a row read twice by the store's
// walk (its status changed under it) may be counted twice; a list never
// names an order twice.
type FindingCounts struct {
	InFlight    int64 `json:"inFlight"`
	Abandoned   int64 `json:"abandoned"`
	Orphans     int64 `json:"orphans"`
	Stale       int64 `json:"stale"`
	Missing     int64 `json:"missing"`
	Uncommitted int64 `json:"uncommitted"`
	Unconfirmed int64 `json:"unconfirmed"`
}

// CounterDrift is one of the store's counters that differs from the held
// rows the store's walk read while nothing changed them: a breach of the
// store's own invariant (pgstore.Violations names it too), which
// reconciliation reports and does not repair.
type CounterDrift struct {
	// Kind is "uses" (used_count), "budget" (the money budget's held
	// discounts) or "window" (an occurrence's held uses).
	Kind string `json:"kind"`
	// Start is the occurrence's start, for a window.
	Start *time.Time `json:"start,omitempty"`
	// Counter is what the counter holds; Rows what the held rows weigh.
	Counter int64 `json:"counter"`
	Rows    int64 `json:"rows"`
}

// String names the counter and both figures, for logs.
func (d CounterDrift) String() string {
	name := d.Kind
	if d.Start != nil {
		name += " " + d.Start.UTC().Format(time.RFC3339)
	}
	return name + ": counter " + strconv.FormatInt(d.Counter, 10) + ", rows " + strconv.FormatInt(d.Rows, 10)
}

// MaxFindings is the most orderIds a ReconcileReport names per kind of
// finding: a broken gate at a million holds is reported in an answer of a
// few tens of kilobytes, with every finding counted in Found and repaired.
const MaxFindings = 1000

// Consistent reports whether the report found nothing to repair or report
// in the gate. CounterDrifts, the store's counters against its own rows,
// are not the gate's to repair and are not counted here.
func (r ReconcileReport) Consistent() bool {
	f := r.Found
	return r.Drift == 0 && !r.windowLost() && f.Abandoned == 0 && f.Orphans == 0 && f.Stale == 0 && f.Missing == 0 &&
		f.Uncommitted == 0 && f.Unconfirmed == 0
}

// Reconcile compares a flash voucher's gate state with the store and, when
// repair is set, makes the repairs that cannot oversell. grace is how old a
// gate hold without a row must be before it counts as an orphan. It
// compares chunk by chunk (compare.go) and repairs each chunk's findings
// as it goes, keeping in memory one chunk, the counts and at most
// ServiceConfig.ReconcileFindings orderIds per kind of finding, never the
// whole voucher. Every read of a store it makes is a chunk of the walks or
// a read of a few counter rows (ReconcileCounts, Holds, Counts,
// LimitCounts): an unknown voucher is answered CodeVoucherNotFound by the
// first of those.
func (s *Service) Reconcile(ctx context.Context, code string, repair bool, grace time.Duration) (rep ReconcileReport, err error) {
	rep = ReconcileReport{Code: code, At: s.now().UTC(), InFlight: []string{}, Abandoned: []string{}, Orphans: []string{},
		Stale: []string{}, Missing: []string{}, Uncommitted: []string{}, Unconfirmed: []string{}}
	if !ValidCode(code) {
		return rep, Errorf(CodeVoucherNotFound, "voucher %q not found", code)
	}
	if s.gate == nil {
		if _, err := s.store.ReconcileCounts(ctx, code); err != nil {
			return rep, err
		}
		return rep, Unavailable(nil, "Redis is not configured")
	}
	pl := newPassLog(ctx, s.log, code, repair)
	defer func() { pl.done(ctx, &rep, err) }()
	// The gate first, then the store, order by order: in both write modes
	// a use is taken in the gate before its row is written, so each page
	// of the store's held rows is looked up in the gate after it was
	// read, and each chunk of the gate's orders in the store after it was
	// read; every repair re-checks its order in one step (docs/rules.md,
	// "Reconciliation reads in chunks"). The store's walk comes first so
	// that the gate learns of the holds it lost (the safe direction)
	// before the gate's walk gives any back.
	pl.next("gateCounts")
	c0, err := s.gate.Counts(ctx, code)
	if err != nil {
		return rep, err
	}
	var gl GateLimitCounts
	if c0.Loaded {
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
	defer func() {
		if rep.Repaired {
			pl.next("audit")
			s.auditReconcile(ctx, rep)
		}
	}()
	rep.RedisHeld = c0.HeldCount
	rep.RedisRemaining = c0.Remaining
	rep.Drift = c0.Remaining - rep.ExpectedRemaining
	pl.next("drift")
	drifted, err := s.readDrift(ctx, code, &rep)
	if err != nil {
		return rep, err
	}
	if sc.BudgetAmount > 0 {
		rep.BudgetAmount, rep.RedisBudgetHeld = sc.BudgetAmount, gl.BudgetHeld
		rep.DatabaseBudgetHeld = sc.BudgetHeld
		rep.BudgetDrift = rep.DatabaseBudgetHeld - rep.RedisBudgetHeld
	}
	rep.Windows = windowDrifts(sc.Windows, gl.Windows)

	cmp := comparison{s: s, code: code, grace: grace, repair: repair, pace: newPacer(s.cfg.ReconcileShare),
		limit: s.cfg.ReconcileFindings, named: map[string]bool{}}
	pl.next("storeWalk")
	stamp, err := s.store.StampCounters(ctx, code)
	if err != nil {
		return rep, err
	}
	if err := cmp.walkStore(ctx, &rep); err != nil {
		return rep, err
	}
	pl.next("counters")
	after, err := s.store.ReconcileCounts(ctx, code)
	if err != nil {
		return rep, err
	}
	marker, err := s.store.CountersMarker(ctx, code)
	if err != nil {
		return rep, err
	}
	rep.checkCounters(stamp != "" && marker == stamp, after, cmp.rows)
	pl.next("gateWalk")
	if err := cmp.walkGate(ctx, &rep); err != nil {
		return rep, err
	}
	if !c0.HeldCounted && !drifted {
		rep.RedisHeld = cmp.holding
	}
	for _, l := range [][]string{rep.InFlight, rep.Abandoned, rep.Orphans, rep.Stale, rep.Missing, rep.Uncommitted, rep.Unconfirmed} {
		sort.Strings(l)
	}
	if !repair || rep.Consistent() {
		return rep, nil
	}
	rep.Repaired = true
	pl.next("repairs")
	if lost := rep.lostWindows(); len(lost) > 0 {
		if rep.RestoredCounters, err = s.gate.RestoreWindows(ctx, code, lost); err != nil {
			return rep, err
		}
	}
	before, clamped, err := s.gate.Clamp(ctx, code, sc.TotalLimit)
	if err != nil {
		return rep, err
	}
	if clamped < before {
		rep.ClampedFrom = &before
	}
	return rep, nil
}

// checkCounters compares the store's counters (after, read after the
// walk) with the held rows the walk read, when the walk was quiet: the
// counters' rows as the stamp taken before the walk left them until after
// was read (unchanged), so no write that gives a redemption a use or
// takes one back committed meanwhile (Store.StampCounters), and no row
// read CONFIRMED was confirmed after the walk began (it may have been read
// RESERVED too). Then every held row was read exactly once, and a counter
// that differs from the rows is a breach of the store's invariant.
// Otherwise the pass leaves the check to a quieter one (RowsChecked
// false).
func (r *ReconcileReport) checkCounters(unchanged bool, after StoreCounts, rows rowSums) {
	r.DatabaseRows = rows.count
	if !unchanged || rows.moved {
		return
	}
	r.RowsChecked = true
	if c := int64(after.Held); c != rows.count {
		r.CounterDrifts = append(r.CounterDrifts, CounterDrift{Kind: "uses", Counter: c, Rows: rows.count})
	}
	if after.BudgetAmount > 0 && after.BudgetHeld != rows.discount {
		r.CounterDrifts = append(r.CounterDrifts, CounterDrift{Kind: "budget", Counter: after.BudgetHeld, Rows: rows.discount})
	}
	var starts []time.Time
	for _, m := range []map[time.Time]int64{after.Windows, rows.windows} {
		for w := range m {
			if !slices.Contains(starts, w) && after.Windows[w] != rows.windows[w] {
				starts = append(starts, w)
			}
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	for _, w := range starts {
		r.CounterDrifts = append(r.CounterDrifts, CounterDrift{Kind: "window", Start: &w, Counter: after.Windows[w], Rows: rows.windows[w]})
	}
}

// findAbandoned splits in-flight holds into those still in flight and
// those whose owner is another instance with no live heartbeat for a while
// (confirmedDead, from alive as ownersAlive read it). This instance's own
// holds are in flight here or settled by SettleUnknown; holds without an
// owner wait for the grace period. When liveness could not be read (read
// false), every hold stays in flight.
func (s *Service) findAbandoned(holds []Hold, alive map[string]bool, read bool) (inFlight, abandoned []Hold) {
	owners := s.otherOwners(holds)
	if len(owners) == 0 || !read {
		return holds, nil
	}
	dead := s.absent.confirmedDead(owners, alive, s.now(), s.cfg.HeartbeatTTL)
	for _, h := range holds {
		if dead[h.Owner] {
			abandoned = append(abandoned, h)
			continue
		}
		inFlight = append(inFlight, h)
	}
	return inFlight, abandoned
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
