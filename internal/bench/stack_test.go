package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// TestStackRowsAllOrNone: the rows of an order of several codes are found
// under their members' orderIds on each voucher, and an order with some
// members held and others not is a violation.
func TestStackRowsAllOrNone(t *testing.T) {
	t.Parallel()
	rep := &Report{prefix: "P", Vouchers: []string{"A", "B", "C"}, cfg: Config{Stack: 2}}
	// Order 1 drew C: it presents C, A. Order 2 drew A: A, B.
	o1, o2 := order{seq: 1, customer: 1, voucher: 2}, order{seq: 2, customer: 2, voucher: 0}
	rep.granted = []map[int64]order{{1: o1, 2: o2}, {2: o2}, {1: o1}}
	rep.unknown = []map[int64]order{{}, {}, {}}
	require.Equal(t, "P-1", rep.rowID(2, o1))
	require.Equal(t, voucher.StackMemberOrderID("P-1", 2), rep.rowID(0, o1))
	require.Equal(t, "P-2", rep.rowID(0, o2))
	require.Equal(t, voucher.StackMemberOrderID("P-2", 2), rep.rowID(1, o2))
	seq, ok := rep.rowSeq(0, voucher.StackMemberOrderID("P-1", 2))
	require.True(t, ok)
	require.EqualValues(t, 1, seq)
	_, ok = rep.rowSeq(1, voucher.StackMemberOrderID("P-1", 2))
	require.False(t, ok, "order 1 has no member on B")

	held := row{customer: "1", status: "RESERVED"}
	rows := []map[string]row{
		{voucher.StackMemberOrderID("P-1", 2): held, "P-2": held},
		{voucher.StackMemberOrderID("P-2", 2): held},
		{"P-1": held},
	}
	var vs violations
	checkStacks(&vs, rep, rows)
	require.Empty(t, vs.result())

	rows[1] = map[string]row{voucher.StackMemberOrderID("P-2", 2): {customer: "2", status: "RELEASED"}}
	vs = violations{}
	checkStacks(&vs, rep, rows)
	require.Len(t, vs.result(), 1)
	require.True(t, strings.Contains(vs.result()[0], "order P-2: 1 of its 2 codes held"), vs.result()[0])
}
