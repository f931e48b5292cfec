package faults

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/voucherd/voucherd/internal/voucher"
)

// stackSep joins the codes of an order of several codes in Op.Voucher: an
// Op whose Voucher holds it is an operation on /reservations (the stack's
// routes), any other on one code's routes.
const stackSep = "+"

// StackCodes returns the codes of an operation on an order of several
// codes, in the order given, or nil for an operation on one code.
func StackCodes(voucherField string) []string {
	if !strings.Contains(voucherField, stackSep) {
		return nil
	}
	return strings.Split(voucherField, stackSep)
}

// StackRow is an order of several codes as PostgreSQL records it
// (voucher_stack).
type StackRow struct {
	Customer string
	Codes    []string
}

// StackState is PostgreSQL's (and, flash modes, Redis's) final state of a
// stack scenario: each code's state, read as for a voucher scenario (rows
// keyed by the redemption's orderId: a stack's member orderIds), the
// stacks recorded, and the members recorded (member orderId → the stack's
// orderId).
type StackState struct {
	Codes   map[string]DBState
	Stacks  map[string]StackRow
	Members map[string]string
	// Gates is each code's gate state after reconciliation; nil in
	// standard mode.
	Gates map[string]GateState
}

// CheckStacks checks a stack scenario's history against its final state:
//
//   - per code: the stored counters' invariants (no oversell, counters
//     equal to the rows), and the gate equal to PostgreSQL (flash modes);
//   - per orderId of an order of several codes, all or none: its members'
//     rows (voucher.StackMemberOrderID) are all held, in one status, or
//     none is; held members are a recorded stack of the codes and the
//     customer asked for; in Redis, every member's hold is there or none;
//   - against the history: a 201 left a recorded stack of those codes and
//     that customer; an acknowledged release left nothing held, an
//     acknowledged confirm (no release tried) left every member CONFIRMED;
//     an order no attempt of its customer could have taken (only refusals
//     and plain 503s) holds nothing;
//   - the single reservations of each code as CheckDatabase checks a
//     voucher's (the members' rows left out).
//
// It returns one line per violation.
func CheckStacks(ops []Op, st StackState, mayFence bool) []string {
	var bad []string
	failf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	byOrder := map[string][]Op{}
	singles := map[string][]Op{}
	for _, op := range ops {
		if op.Outcome == NotSent {
			continue
		}
		if StackCodes(op.Voucher) != nil {
			byOrder[op.OrderID] = append(byOrder[op.OrderID], op)
		} else {
			singles[op.Voucher] = append(singles[op.Voucher], op)
		}
	}
	// memberOf maps every member orderId the history could have made to
	// its stack's orderId, so that the singles' check leaves them out.
	memberOf := map[string]string{}
	for id, attempts := range byOrder {
		for _, op := range attempts {
			for i := range StackCodes(op.Voucher) {
				memberOf[voucher.StackMemberOrderID(id, i+1)] = id
			}
		}
	}
	for m, id := range st.Members {
		memberOf[m] = id
	}

	for _, code := range sortedKeys(st.Codes) {
		db := st.Codes[code]
		for _, b := range db.Stored {
			failf("code %s: stored counters: %s", code, b)
		}
		n := 0
		for _, r := range db.Rows {
			if r.Held() {
				n++
			}
		}
		if n > db.TotalLimit {
			failf("code %s: OVERSOLD: %d held of %d", code, n, db.TotalLimit)
		}
		if st.Gates != nil {
			for _, p := range CheckGate(db, st.Gates[code]) {
				failf("code %s after reconciliation: %s", code, p)
			}
		}
		// The singles of this code, as a voucher scenario's.
		rest := DBState{TotalLimit: db.TotalLimit, PerUserLimit: db.PerUserLimit, UsedCount: db.UsedCount, Rows: map[string]Row{}}
		for id, r := range db.Rows {
			if _, ok := memberOf[id]; !ok {
				rest.Rows[id] = r
			}
		}
		for _, p := range CheckDatabase(VoucherSpec{Code: code}, singles[code], rest, mayFence) {
			failf("code %s, single reservations: %s", code, p)
		}
	}

	for _, id := range sortedKeys(byOrder) {
		attempts := byOrder[id]
		sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].Call < attempts[j].Call })
		// The order's owner: its first attempt (probes name a known order
		// with another customer, later).
		owner := attempts[0]
		codes := StackCodes(owner.Voucher)
		var heldCodes []string
		statuses := map[string]bool{}
		var gateHeld []string
		for i, code := range codes {
			m := voucher.StackMemberOrderID(id, i+1)
			if r, ok := st.Codes[code].Rows[m]; ok && r.Held() {
				heldCodes = append(heldCodes, code)
				statuses[r.Status] = true
				if r.Customer != owner.Customer {
					failf("stack %s: member %s of code %s is held for customer %s, the order is %s's\n%s", id, m, code, r.Customer, owner.Customer, opsText(attempts))
				}
			}
			if g, ok := st.Gates[code]; ok {
				if _, held := g.Holds[m]; held {
					gateHeld = append(gateHeld, code)
				}
			}
		}
		if len(heldCodes) != 0 && len(heldCodes) != len(codes) {
			failf("stack %s: NOT ALL OR NONE in PostgreSQL: codes %v held of %v\n%s", id, heldCodes, codes, opsText(attempts))
		}
		if len(statuses) > 1 {
			failf("stack %s: members in different statuses %v\n%s", id, sortedKeys(statuses), opsText(attempts))
		}
		if st.Gates != nil && len(gateHeld) != 0 && len(gateHeld) != len(codes) {
			failf("stack %s: NOT ALL OR NONE in Redis: codes %v held of %v\n%s", id, gateHeld, codes, opsText(attempts))
		}
		rec, recorded := st.Stacks[id]
		if recorded && (rec.Customer != owner.Customer || !slices.Equal(rec.Codes, codes)) {
			failf("stack %s: recorded for customer %s with %v, asked by %s with %v\n%s", id, rec.Customer, rec.Codes, owner.Customer, codes, opsText(attempts))
		}
		if len(heldCodes) > 0 && !recorded {
			failf("stack %s: members held but no stack recorded\n%s", id, opsText(attempts))
		}
		mayHaveTaken, answered, released, confirmed, releaseTried, confirmTried := false, false, false, false, false, false
		for _, op := range attempts {
			switch op.Kind {
			case Reserve:
				if op.Customer == owner.Customer && op.Voucher == owner.Voucher && (op.Outcome == OK || op.Outcome == Unknown) {
					mayHaveTaken = true
				}
				if op.Outcome == OK {
					answered = true
					if op.Customer != owner.Customer || op.Voucher != owner.Voucher {
						failf("stack %s: 201 for customer %s with %s, the order is %s's with %s\n%s", id, op.Customer, op.Voucher, owner.Customer, owner.Voucher, opsText(attempts))
					}
				}
			case Release:
				releaseTried = true
				released = released || op.Outcome == OK
			case Confirm:
				confirmTried = true
				confirmed = confirmed || op.Outcome == OK
			}
		}
		switch {
		case answered && !recorded:
			failf("stack %s: 201 but no stack recorded\n%s", id, opsText(attempts))
		case recorded && !mayHaveTaken:
			failf("stack %s: recorded, but no attempt of its customer could have taken it\n%s", id, opsText(attempts))
		case len(heldCodes) > 0 && released:
			failf("stack %s: release acknowledged but codes %v held\n%s", id, heldCodes, opsText(attempts))
		case confirmed && !releaseTried && (len(heldCodes) != len(codes) || !statuses["CONFIRMED"] || len(statuses) != 1):
			failf("stack %s: confirm acknowledged but members held %v in %v\n%s", id, heldCodes, sortedKeys(statuses), opsText(attempts))
		case statuses["CONFIRMED"] && !confirmTried:
			failf("stack %s: CONFIRMED without a confirm\n%s", id, opsText(attempts))
		case answered && len(heldCodes) == 0 && !releaseTried:
			failf("stack %s: 201, never released, but nothing held\n%s", id, opsText(attempts))
		}
	}
	// Stacks recorded that nobody asked for.
	for _, id := range sortedKeys(st.Stacks) {
		if _, ok := byOrder[id]; !ok {
			failf("stack %s recorded but never asked for", id)
		}
	}
	return bad
}
