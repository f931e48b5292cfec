package voucher

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// driftBounds: exact when the gate did not change between its reads,
// bounded by the changes between them otherwise, and nothing for a limit
// change, a clamp or a reload in between. Each case's gate is 10 uses with
// expected the store's remaining.
func TestDriftBounds(t *testing.T) {
	t.Parallel()
	counts := func(remaining, held, version int64) GateCounts {
		return GateCounts{Loaded: true, Remaining: remaining, HeldCount: held, HeldCounted: true, Version: version}
	}
	for _, tc := range []struct {
		name     string
		c1, c3   GateCounts
		expected int64
		lo, hi   int64
		ok       bool
	}{
		{"quiet and agreeing", counts(7, 3, 5), counts(7, 3, 5), 7, 0, 0, true},
		{"quiet, too many left", counts(9, 1, 5), counts(9, 1, 5), 7, 2, 2, true},
		{"quiet, too few left", counts(5, 5, 5), counts(5, 5, 5), 7, -2, -2, true},
		// A take between the gate's first read and the store's, written
		// there: the first read alone says +1, the bounds say 0.
		{"a take before the store read", counts(7, 3, 5), counts(6, 4, 6), 6, 0, 1, true},
		// A take between the first gate read and the store's read and a
		// release after it: both single reads say +1; the bounds allow 0.
		{"a take, then a release", counts(7, 3, 5), counts(7, 3, 7), 6, 0, 2, true},
		// Two holds lost, whatever moved meanwhile: still certain.
		{"lost holds under traffic", counts(9, 1, 5), counts(8, 2, 6), 6, 2, 3, true},
		{"takes in flight", counts(7, 3, 5), counts(4, 6, 8), 9, -5, -2, true},
		{"a clamp in between", counts(9, 1, 5), counts(7, 1, 5), 7, 0, 0, false},
		{"a reload in between", counts(7, 3, 5), counts(7, 3, 1), 7, 0, 0, false},
		{"too many changes", counts(7, 3, 5), counts(7, 3, 5+maxBracketChanges+1), 7, 0, 0, false},
	} {
		lo, hi, ok := driftBounds(tc.c1, tc.c3, tc.expected)
		require.Equal(t, tc.ok, ok, tc.name)
		if ok {
			require.Equal(t, []int64{tc.lo, tc.hi}, []int64{lo, hi}, tc.name)
		}
	}
}
