package voucher

import (
	"context"
)

// driftTries bounds how often one reconciliation reads the drift's bracket
// while the voucher keeps changing under it.
const driftTries = 3

// maxBracketChanges is the most changes of a voucher's orders between the
// two gate reads of a bracket that driftBounds works through; more leave
// the bracket uncertain.
const maxBracketChanges = 1 << 16

// readDrift sets rep's drift, and the counts it is computed from, from a
// bracket of three short reads: the gate's counts, the store's held count
// (one row), the gate's counts again (docs/rules.md, "Reconciliation reads
// in chunks"). When the gate did not change between its two reads, the
// drift is exact at the store's read. When it did, the changes between
// (the version's moves, each moving held by one at most) bound what the
// gate held at the store's read; the bracket is read again, up to
// driftTries times, and then the drift reported is only what is certain
// within the last bounds: the smallest positive or negative drift they
// allow, 0 when they allow 0. It returns false, leaving rep alone, for a
// voucher without an exact held count, and when the last bracket bounds
// nothing (a limit change or a clamp inside it): the drift of the whole
// read stands.
func (s *Service) readDrift(ctx context.Context, code string, rep *ReconcileReport) (bool, error) {
	for try := 1; ; try++ {
		c1, err := s.gate.Counts(ctx, code)
		if err != nil {
			return false, err
		}
		h, err := s.store.Holds(ctx, code)
		if err != nil {
			return false, err
		}
		c3, err := s.gate.Counts(ctx, code)
		if err != nil {
			return false, err
		}
		if !c1.HeldCounted || !c3.HeldCounted {
			return false, nil
		}
		expected := int64(h.TotalLimit) - int64(h.UsedCount)
		lo, hi, ok := driftBounds(c1, c3, expected)
		exact := ok && lo == hi
		if !exact && try < driftTries {
			continue
		}
		if !ok {
			return false, nil
		}
		rep.TotalLimit, rep.DatabaseHeld, rep.ExpectedRemaining = h.TotalLimit, h.UsedCount, expected
		rep.RedisRemaining, rep.RedisHeld = c1.Remaining, c1.HeldCount
		switch {
		case lo > 0:
			rep.Drift = lo
		case hi < 0:
			rep.Drift = hi
		default:
			rep.Drift = 0
		}
		return true, nil
	}
}

// driftBounds returns the least and the greatest drift (remaining minus
// expected) the gate can have had between its reads c1 and c3, and false
// when the reads bound nothing: a limit change or a clamp between them
// (remaining + held moved), a version that went back (a reload) or too many
// changes. Each change between moved held by one at most and remaining the
// other way: k changes, a of them before the store's read and k-a after,
// put held at that read within a of c1's and within k-a of c3's.
func driftBounds(c1, c3 GateCounts, expected int64) (lo, hi int64, ok bool) {
	sum := c1.Remaining + c1.HeldCount
	k := c3.Version - c1.Version
	if c3.Remaining+c3.HeldCount != sum || k < 0 || k > maxBracketChanges {
		return 0, 0, false
	}
	h1, h3 := c1.HeldCount, c3.HeldCount
	var heldLo, heldHi int64
	for a := range k + 1 {
		l, u := max(h1-a, h3-(k-a), 0), min(h1+a, h3+(k-a))
		if l > u {
			continue
		}
		if !ok || l < heldLo {
			heldLo = l
		}
		if !ok || u > heldHi {
			heldHi = u
		}
		ok = true
	}
	return sum - heldHi - expected, sum - heldLo - expected, ok
}
