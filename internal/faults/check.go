package faults

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Row is one redemption row of the voucher under test, as PostgreSQL has it.
type Row struct {
	OrderID  string
	Customer string
	Status   string // RESERVED, CONFIRMED or RELEASED
	// Code is the campaign code the reservation was made with; "" for a
	// voucher's.
	Code string `json:",omitempty"`
}

// Held reports whether the row holds a use.
func (r Row) Held() bool { return r.Status == "RESERVED" || r.Status == "CONFIRMED" }

// DBState is PostgreSQL's final state for the voucher (or campaign budget)
// under test.
type DBState struct {
	TotalLimit   int
	PerUserLimit int
	UsedCount    int
	Rows         map[string]Row
	// Stored lists the breaches of the stored counters' invariants
	// (pgstore.Violations: oversell, used_count, customer counters,
	// per-user limit, and for a campaign code reuse and code campaign)
	// found when the state was read.
	Stored []string
	// The money budget of a budget scenario (BudgetAmount 0: none): its
	// amount, its counter (voucher_limit.held) and the discounts of the
	// held rows, read in one statement.
	BudgetAmount, BudgetHeld, BudgetRowsHeld int64
	// Windows are the counters of the occurrences of the voucher's
	// windows (a window scenario; nil: none).
	Windows []WindowCounter
}

// WindowCounter is one occurrence's counter row (voucher_limit, kind
// window) and the held rows taken in it.
type WindowCounter struct {
	Start         time.Time
	Cap, Held     int64
	RowsHeld      int64
	HasCounterRow bool
}

// GateState is Redis's final state for the voucher under test (flash modes).
type GateState struct {
	Loaded    bool
	Remaining int64
	Users     map[string]int
	// Holds maps orderIds the gate counts as holding a use (held or
	// pending) to their customer; released markers are left out.
	Holds map[string]string
	// BudgetHeld is the gate's money budget counter; BudgetHolds the
	// discounts of Holds.
	BudgetHeld, BudgetHolds int64
	// Windows are the gate's counters of the occurrences; WindowHolds
	// counts Holds per occurrence.
	Windows, WindowHolds map[time.Time]int64
}

// CheckWindows checks the quota per occurrence of a window scenario: in
// PostgreSQL each occurrence's counter equals the held rows taken in it
// and is at most windowLimit (every held row's occurrence has a counter),
// and, with the gate's state (flash modes, after reconciliation), the
// gate's counter of each occurrence equals the held rows and its holds
// taken in it. It returns one line per violation.
func CheckWindows(db DBState, windowLimit int64, g *GateState) []string {
	var bad []string
	failf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if windowLimit == 0 {
		return nil
	}
	rows := map[time.Time]int64{}
	for _, w := range db.Windows {
		rows[w.Start] = w.RowsHeld
		switch {
		case !w.HasCounterRow && w.RowsHeld > 0:
			failf("window %s: %d held rows and no counter", w.Start.Format(time.RFC3339), w.RowsHeld)
		case w.HasCounterRow && w.Held != w.RowsHeld:
			failf("window %s: the held rows count %d, the counter holds %d", w.Start.Format(time.RFC3339), w.RowsHeld, w.Held)
		}
		if w.RowsHeld > windowLimit || w.Held > windowLimit {
			failf("window %s: OVERSOLD: %d held rows, counter %d, windowLimit %d", w.Start.Format(time.RFC3339), w.RowsHeld, w.Held, windowLimit)
		}
	}
	if g != nil && g.Loaded {
		for _, m := range []map[time.Time]int64{rows, g.Windows, g.WindowHolds} {
			for start := range m {
				if g.Windows[start] != rows[start] || g.WindowHolds[start] != rows[start] {
					failf("window %s: Redis's counter holds %d and its holds %d, PostgreSQL's held rows %d",
						start.Format(time.RFC3339), g.Windows[start], g.WindowHolds[start], rows[start])
				}
			}
		}
	}
	return bad
}

// CheckBudget checks the money invariant of a budget scenario: the
// discounts of the held rows = the counter (budgetReserved +
// budgetConfirmed) <= budgetAmount in PostgreSQL, and, with the gate's
// state (flash modes, after reconciliation), the gate's counter and the
// discounts of its holds equal the same. It returns one line per
// violation.
func CheckBudget(db DBState, g *GateState) []string {
	var bad []string
	failf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if db.BudgetAmount == 0 {
		return nil
	}
	if db.BudgetRowsHeld != db.BudgetHeld {
		failf("money: the held rows' discounts sum to %d, the budget counter holds %d", db.BudgetRowsHeld, db.BudgetHeld)
	}
	if db.BudgetHeld > db.BudgetAmount {
		failf("money: OVERSPENT: %d held of a budget of %d", db.BudgetHeld, db.BudgetAmount)
	}
	if g != nil && g.Loaded {
		if g.BudgetHeld != db.BudgetRowsHeld {
			failf("money: Redis's budget counter holds %d, PostgreSQL's held rows %d", g.BudgetHeld, db.BudgetRowsHeld)
		}
		if g.BudgetHolds != g.BudgetHeld {
			failf("money: Redis's holds' discounts sum to %d, its budget counter holds %d", g.BudgetHolds, g.BudgetHeld)
		}
	}
	return bad
}

// CheckDatabase checks the final PostgreSQL state against itself (the
// breaches in db.Stored) and against the history: every 201 has exactly one
// row of its customer (for a campaign, with the code it was asked with),
// every row was asked for, and every acknowledged release, confirm and
// replacement is there (a replaced order RELEASED: a replacement that left
// it held would hold the use twice). A replacement answered or unknown
// counts as a release that was tried on the order it names. It returns one
// line per violation.
//
// mayFence allows a RELEASED row that no client released when every
// reservation attempt of its customer had an unknown outcome (or was
// refused): the flash modes fence such an order whose write never reached
// PostgreSQL (Kafka mode: its event, long after; both: a write whose
// outcome was unknown, or a hold of an instance that died; docs/faults.md,
// finding 8).
func CheckDatabase(spec VoucherSpec, ops []Op, db DBState, mayFence bool) []string {
	var bad []string
	failf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	for _, b := range db.Stored {
		failf("stored counters: %s", b)
	}

	byOrder := map[string][]Op{}
	// replacedBy holds, per orderId, the replacements that named it.
	replacedBy := map[string][]Op{}
	for _, op := range ops {
		if spec.covers(op.Voucher) && op.Outcome != NotSent {
			byOrder[op.OrderID] = append(byOrder[op.OrderID], op)
			if op.Kind == Reserve && op.Replaces != "" {
				replacedBy[op.Replaces] = append(replacedBy[op.Replaces], op)
			}
		}
	}
	// codeOf is the code a row must carry when op made it.
	codeOf := func(op Op) string {
		if spec.Campaign() {
			return op.Voucher
		}
		return ""
	}
	for _, r := range db.Rows {
		if _, ok := byOrder[r.OrderID]; !ok {
			failf("row %s (customer %s, %s) was never asked for", r.OrderID, r.Customer, r.Status)
		}
	}
	for _, id := range sortedKeys(byOrder) {
		attempts := byOrder[id]
		sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].Call < attempts[j].Call })
		row, hasRow := db.Rows[id]
		var okCust []string
		var okOps []Op
		mayHaveTaken, only503, released, confirmed, releaseTried, confirmTried := false, false, false, false, false, false
		for _, op := range attempts {
			switch op.Kind {
			case Reserve:
				if hasRow && op.Customer == row.Customer && codeOf(op) == row.Code {
					switch op.Outcome {
					case OK, Unknown:
						mayHaveTaken = true
					case Unavailable:
						only503 = true
					}
				}
				if op.Outcome == OK {
					okCust = append(okCust, op.Customer)
					okOps = append(okOps, op)
				}
			case Release:
				releaseTried = true
				released = released || op.Outcome == OK
			case Confirm:
				confirmTried = true
				confirmed = confirmed || op.Outcome == OK
			}
		}
		var replacedOK []Op
		for _, op := range replacedBy[id] {
			if op.Outcome == OK {
				replacedOK = append(replacedOK, op)
			}
			if (op.Outcome == OK || op.Outcome == Unknown) && (!hasRow || op.Customer == row.Customer) {
				releaseTried = true
			}
		}
		for _, op := range okOps {
			c := op.Customer
			switch {
			case !hasRow:
				failf("order %s: 201 for customer %s but no row\n%s", id, c, opsText(attempts))
			case row.Customer != c:
				failf("order %s: 201 for customer %s but the row is customer %s's\n%s", id, c, row.Customer, opsText(attempts))
			case row.Code != codeOf(op):
				failf("order %s: 201 for code %s but the row has code %q\n%s", id, op.Voucher, row.Code, opsText(attempts))
			}
		}
		for _, op := range replacedOK {
			if row.Status != "RELEASED" {
				what := "no row"
				if hasRow {
					what = "its row is " + row.Status
				}
				failf("order %s: replaced by %s (201) but %s\n%s", id, op.OrderID, what, opsText(append(attempts, replacedBy[id]...)))
			}
		}
		if hasRow && !mayHaveTaken {
			what := "no attempt of its customer that could have taken it"
			if spec.Campaign() {
				what = "no attempt of its customer with its code " + row.Code + " that could have taken it"
			}
			if only503 {
				what = "its customer's attempts were answered 503 (\"nothing was taken\") or refused"
			}
			failf("order %s: row %s for customer %s, but %s\n%s", id, row.Status, row.Customer, what, opsText(attempts))
		}
		if !hasRow {
			if released || confirmed {
				failf("order %s: release/confirm acknowledged but no row\n%s", id, opsText(attempts))
			}
			continue
		}
		switch {
		case row.Status == "RELEASED" && !releaseTried && !(mayFence && !slices.Contains(okCust, row.Customer)):
			failf("order %s: RELEASED without a release\n%s", id, opsText(attempts))
		case row.Status == "CONFIRMED" && !confirmTried:
			failf("order %s: CONFIRMED without a confirm\n%s", id, opsText(attempts))
		case released && row.Status != "RELEASED":
			failf("order %s: release acknowledged but the row is %s\n%s", id, row.Status, opsText(attempts))
		case confirmed && !releaseTried && row.Status != "CONFIRMED":
			failf("order %s: confirm acknowledged but the row is %s\n%s", id, row.Status, opsText(attempts))
		}
	}
	return bad
}

// CheckFinal503 checks the promise of a plain 503 ("nothing was taken"):
// an order whose last reservation attempt by its row's customer was
// answered 503 without outcomeUnknown holds no use at the end. Excused are
// orders with an attempt of that customer answered 201, or lost on the
// client's side (a timeout, a broken connection: nothing voucherd can
// know of). A 503 with outcomeUnknown (Unknown with status 503) excuses
// nothing: a retry of an order whose outcome is still unknown must say so
// too, so a client that reads the last answer is never misled.
func CheckFinal503(ops []Op, db DBState) []string {
	var bad []string
	byOrder := map[string][]Op{}
	for _, op := range ops {
		if op.Kind != Reserve || op.Outcome == NotSent {
			continue
		}
		if row, ok := db.Rows[op.OrderID]; ok && row.Held() && op.Customer == row.Customer {
			byOrder[op.OrderID] = append(byOrder[op.OrderID], op)
		}
	}
	for _, id := range sortedKeys(byOrder) {
		attempts := byOrder[id]
		sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].Call < attempts[j].Call })
		if attempts[len(attempts)-1].Outcome != Unavailable {
			continue
		}
		excused := false
		for _, op := range attempts {
			if op.Outcome == OK || (op.Outcome == Unknown && op.Status != 503) {
				excused = true
			}
		}
		if !excused {
			bad = append(bad, fmt.Sprintf("order %s: last answer a plain 503 (\"nothing was taken\") but the row is %s\n%s",
				id, db.Rows[id].Status, opsText(attempts)))
		}
	}
	return bad
}

// CheckReplays checks that a reservation answered as a replay
// (Idempotent-Replayed) follows an attempt on the same orderId that may
// have taken the use: a 201 or an unknown outcome. A replay after nothing
// but 503s means a 503 took a use, which the contract rules out.
func CheckReplays(ops []Op) []string {
	var bad []string
	byOrder := map[string][]Op{}
	for _, op := range ops {
		if op.Kind == Reserve && op.Outcome != NotSent {
			byOrder[op.OrderID] = append(byOrder[op.OrderID], op)
		}
	}
	for _, id := range sortedKeys(byOrder) {
		attempts := byOrder[id]
		sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].Call < attempts[j].Call })
		for i, op := range attempts {
			if op.Outcome != OK || !op.Replayed {
				continue
			}
			ok := false
			for _, prev := range attempts[:i] {
				if prev.Outcome == OK || prev.Outcome == Unknown {
					ok = true
				}
			}
			if !ok {
				bad = append(bad, fmt.Sprintf("order %s: replayed 201 but no earlier attempt could have taken the use (a 503 took it?)\n%s", id, opsText(attempts)))
			}
			break
		}
	}
	return bad
}

// CheckGate checks that Redis agrees with PostgreSQL once reconciliation
// has run: remaining = totalLimit - held, the same held orders for the
// same customers, the same per-customer counts.
func CheckGate(db DBState, g GateState) []string {
	var bad []string
	failf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if !g.Loaded {
		return []string{"the voucher is not loaded in Redis"}
	}
	held := map[string]string{}
	heldBy := map[string]int{}
	for _, r := range db.Rows {
		if r.Held() {
			held[r.OrderID] = r.Customer
			heldBy[r.Customer]++
		}
	}
	if want := int64(db.TotalLimit - len(held)); g.Remaining != want {
		failf("Redis remaining %d, PostgreSQL totalLimit - held = %d", g.Remaining, want)
	}
	for _, id := range sortedKeys(held) {
		c, ok := g.Holds[id]
		switch {
		case !ok:
			failf("order %s is held in PostgreSQL (customer %s) but not in Redis", id, held[id])
		case c != held[id]:
			failf("order %s is customer %s's in PostgreSQL but %s's in Redis", id, held[id], c)
		}
	}
	for _, id := range sortedKeys(g.Holds) {
		if _, ok := held[id]; !ok {
			failf("order %s holds a use in Redis (customer %s) but not in PostgreSQL", id, g.Holds[id])
		}
	}
	custs := map[string]bool{}
	for c := range heldBy {
		custs[c] = true
	}
	for c, n := range g.Users {
		if n != 0 {
			custs[c] = true
		}
	}
	for _, c := range sortedKeys(custs) {
		if g.Users[c] != heldBy[c] {
			failf("customer %s holds %d in Redis, %d in PostgreSQL", c, g.Users[c], heldBy[c])
		}
	}
	return bad
}

func opsText(ops []Op) string {
	s := ""
	for i, op := range ops {
		if i == 12 {
			s += fmt.Sprintf("    … %d more\n", len(ops)-i)
			break
		}
		s += "    " + op.String() + "\n"
	}
	return s
}

func sortedKeys[K interface{ ~string | ~int64 }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
