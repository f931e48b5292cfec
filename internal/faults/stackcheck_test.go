package faults

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// TestCheckStacks feeds CheckStacks a consistent state and states that
// break all or none, in PostgreSQL and in Redis, or the history.
func TestCheckStacks(t *testing.T) {
	t.Parallel()
	m2 := voucher.StackMemberOrderID("K1", 2)
	ops := []Op{
		{Kind: Reserve, Voucher: "A+B", Customer: "c1", OrderID: "K1", Call: 1, Return: 2, Outcome: OK},
		{Kind: Reserve, Voucher: "B+A", Customer: "c2", OrderID: "K2", Call: 1, Return: 2, Outcome: OutOfStock},
		{Kind: Reserve, Voucher: "A", Customer: "c3", OrderID: "S1", Call: 1, Return: 2, Outcome: OK},
	}
	good := func() StackState {
		return StackState{
			Codes: map[string]DBState{
				"A": {TotalLimit: 2, Rows: map[string]Row{"K1": {OrderID: "K1", Customer: "c1", Status: "RESERVED"}, "S1": {OrderID: "S1", Customer: "c3", Status: "RESERVED"}}},
				"B": {TotalLimit: 1, Rows: map[string]Row{m2: {OrderID: m2, Customer: "c1", Status: "RESERVED"}}},
			},
			Stacks:  map[string]StackRow{"K1": {Customer: "c1", Codes: []string{"A", "B"}}},
			Members: map[string]string{"K1": "K1", m2: "K1"},
			Gates: map[string]GateState{
				"A": {Loaded: true, Remaining: 0, Users: map[string]int{"c1": 1, "c3": 1}, Holds: map[string]string{"K1": "c1", "S1": "c3"}},
				"B": {Loaded: true, Remaining: 0, Users: map[string]int{"c1": 1}, Holds: map[string]string{m2: "c1"}},
			},
		}
	}
	require.Empty(t, CheckStacks(ops, good(), true))

	for name, tc := range map[string]struct {
		change func(*StackState)
		want   string
	}{
		"a member released alone": {func(s *StackState) {
			s.Codes["B"].Rows[m2] = Row{OrderID: m2, Customer: "c1", Status: "RELEASED"}
		}, "NOT ALL OR NONE in PostgreSQL"},
		"a member's hold missing in Redis": {func(s *StackState) {
			delete(s.Gates["B"].Holds, m2)
		}, "NOT ALL OR NONE in Redis"},
		"a refused stack holds": {func(s *StackState) {
			k2 := voucher.StackMemberOrderID("K2", 2)
			s.Codes["B"].Rows["K2"] = Row{OrderID: "K2", Customer: "c2", Status: "RESERVED"}
			s.Codes["A"].Rows[k2] = Row{OrderID: k2, Customer: "c2", Status: "RESERVED"}
			s.Stacks["K2"] = StackRow{Customer: "c2", Codes: []string{"B", "A"}}
		}, "no attempt of its customer could have taken it"},
		"oversold": {func(s *StackState) {
			s.Codes["B"].Rows["S9"] = Row{OrderID: "S9", Customer: "c3", Status: "RESERVED"}
		}, "OVERSOLD"},
		"a 201 not recorded": {func(s *StackState) {
			delete(s.Stacks, "K1")
		}, "no stack recorded"},
	} {
		s := good()
		tc.change(&s)
		got := strings.Join(CheckStacks(ops, s, true), "\n")
		require.Contains(t, got, tc.want, name)
	}
}
