package redisgate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/conformance"
	"github.com/voucherd/voucherd/internal/voucher"
)

// validate.lua answers the last request of every case reserve.lua decides
// as reserve.lua answers it once the others were reserved, and writes
// nothing: the voucher's whole state in Redis is the same after it, and
// reserve.lua asked right after still answers as the table says.
func TestConformanceValidateScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	for i, c := range conformance.Cases {
		if c.Skips(conformance.Script) != "" {
			continue
		}
		code, perUser := setUpGateCase(t, g, i, c)
		last := len(c.Requests) - 1
		for j, r := range c.Requests[:last] {
			d, err := g.Reserve(ctx, code, perUser, requestHold(c, i, r))
			require.NoError(t, err)
			requireGateAnswer(t, c, j, d.Outcome)
		}
		before, err := g.Inspect(ctx, code)
		require.NoError(t, err)
		r := c.Requests[last]
		h := requestHold(c, i, r)
		d, err := g.Validate(ctx, code, perUser, conformance.OrderID(i, r.Order), r.Customer, caseCode(c, i, r.CodeIndex),
			voucher.TakeLimits{Budget: h.Budget, Discount: h.DiscountAmount, WindowLimit: h.WindowLimit, Window: h.Window})
		require.NoError(t, err)
		requireGateAnswer(t, c, last, d.Outcome)
		if w := c.Want[last]; d.Outcome == voucher.GateTaken && w.Discount != nil && !w.Replay {
			want := h.DiscountAmount
			if d.Discount > 0 {
				want = d.Discount
			}
			require.Equal(t, *w.Discount, want, "%s: the validation's discount", c.Name)
		}
		after, err := g.Inspect(ctx, code)
		require.NoError(t, err)
		require.Equal(t, before, after, "%s: validate.lua changed the voucher", c.Name)
		d, err = g.Reserve(ctx, code, perUser, requestHold(c, i, r))
		require.NoError(t, err)
		requireGateAnswer(t, c, last, d.Outcome)
	}
}

// replace.lua answers every replacement case it decides as the table says,
// and leaves the voucher as the reservations asked after it show: the
// remaining count and the customers' counts never move.
func TestConformanceReplaceScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	for i, c := range conformance.ReplaceCases {
		if c.Skips(conformance.ReplaceScript) != "" {
			continue
		}
		n := len(conformance.Cases) + i
		cc := conformance.Case{Name: c.Name, Voucher: c.Voucher, Before: c.Before}
		code, perUser := setUpGateCase(t, g, n, cc)
		for j, r := range c.Requests {
			before, err := g.Inspect(ctx, code)
			require.NoError(t, err)
			h := caseHold(cc, n, r.Customer, r.Order, r.OrderAmount())
			h.Code = caseCode(cc, n, r.CodeIndex)
			d, err := g.Replace(ctx, code, h, conformance.OrderID(n, r.Replaces))
			require.NoError(t, err)
			want, _ := c.Want[j].Gate()
			require.Equal(t, want.String(), d.Outcome.String(), "%s: replacement %d", c.Name, j)
			after, err := g.Inspect(ctx, code)
			require.NoError(t, err)
			require.Equal(t, before.Remaining, after.Remaining, "%s: replacement %d moved the count", c.Name, j)
			require.Equal(t, before.Users, after.Users, "%s: replacement %d moved a customer's count", c.Name, j)
		}
		for j, r := range c.After {
			d, err := g.Reserve(ctx, code, perUser, requestHold(cc, n, r))
			require.NoError(t, err)
			requireGateAnswer(t, conformance.Case{Name: c.Name, Want: c.WantAfter}, j, d.Outcome)
		}
	}
}

// Unreplace undoes a replacement: the replaced order holds its use again,
// the new orderId is unknown, and the counts are what they were.
func TestUnreplace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := conformance.VoucherSpec{TotalLimit: 1, PerUserLimit: 1}.Voucher("UNREPL")
	_, err := g.Load(ctx, voucher.Snapshot{Voucher: v})
	require.NoError(t, err)
	unrepl := conformance.Case{Voucher: conformance.VoucherSpec{TotalLimit: 1, PerUserLimit: 1}}
	d, err := g.Reserve(ctx, v.Code, 1, caseHold(unrepl, 0, "1", "a", 100))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	before, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	d, err = g.Replace(ctx, v.Code, caseHold(unrepl, 0, "1", "b", 100), conformance.OrderID(0, "a"))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	undone, err := g.Unreplace(ctx, v.Code, conformance.OrderID(0, "b"), conformance.OrderID(0, "a"))
	require.NoError(t, err)
	require.True(t, undone)
	after, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.Equal(t, before, after)
	undone, err = g.Unreplace(ctx, v.Code, conformance.OrderID(0, "b"), conformance.OrderID(0, "a"))
	require.NoError(t, err)
	require.False(t, undone, "a second undo changes nothing")
}
