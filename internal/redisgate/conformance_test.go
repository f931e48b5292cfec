package redisgate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/conformance"
	"github.com/voucherd/voucherd/internal/voucher"
)

// caseHold is the hold a case's reservation at Now asks the gate to store:
// the discount computed for the order, the voucher's money budget, its
// occurrence and quota per occurrence, as the flash paths ask.
func caseHold(c conformance.Case, i int, customer string, order string, amount int64) voucher.Hold {
	return caseHoldAt(c, i, customer, order, amount, conformance.Now)
}

// caseHoldAt is caseHold for a reservation at at.
func caseHoldAt(c conformance.Case, i int, customer string, order string, amount int64, at time.Time) voucher.Hold {
	v := c.Voucher.Voucher(conformance.Code(i))
	return voucher.Hold{OrderID: conformance.OrderID(i, order), CustomerID: customer, OrderAmount: amount,
		DiscountAmount: v.Discount().Compute(amount), ReservedAt: at, ExpiresAt: at.Add(conformance.TTL),
		Budget: voucher.Budget{Amount: v.Budget.Amount, Clip: v.Budget.Clip},
		Window: c.Voucher.Occurrence(at), WindowLimit: v.WindowLimit}
}

// caseCode is the campaign code step or request k of case i presents, ""
// for a voucher's case: a campaign case's budget is gated under its own
// code (the campaign id), its codes carried by the holds.
func caseCode(c conformance.Case, i, k int) string {
	if !c.Voucher.Campaign {
		return ""
	}
	return conformance.CampaignCode(i, k)
}

// requestHold is the hold request r of case i asks the gate to store.
func requestHold(c conformance.Case, i int, r conformance.Request) voucher.Hold {
	h := caseHold(c, i, r.Customer, r.Order, r.OrderAmount())
	h.Code = caseCode(c, i, r.CodeIndex)
	return h
}

// setUpGateCase loads case i's voucher into g and runs its steps. A confirm
// changes nothing in the gate: a held use stays held.
func setUpGateCase(t *testing.T, g *Gate, i int, c conformance.Case) (code string, perUser int32) {
	t.Helper()
	ctx := context.Background()
	v := c.Voucher.Voucher(conformance.Code(i))
	wrote, err := g.Load(ctx, voucher.Snapshot{Voucher: v})
	require.NoError(t, err)
	require.True(t, wrote)
	for _, st := range c.Before {
		require.False(t, st.OtherVoucher, "%s: the gate has no other voucher", c.Name)
		switch st.Kind {
		case conformance.StepReserve:
			h := caseHoldAt(c, i, st.Customer, st.Order, conformance.Amount, st.At())
			h.Code = caseCode(c, i, st.CodeIndex)
			d, err := g.Reserve(ctx, v.Code, v.PerUserLimit, h)
			require.NoError(t, err)
			require.Equal(t, voucher.GateTaken, d.Outcome, "%s: step %+v", c.Name, st)
		case conformance.StepRelease:
			gave, err := g.Release(ctx, v.Code, conformance.OrderID(i, st.Order), voucher.ReleaseMark)
			require.NoError(t, err)
			require.True(t, gave)
		}
	}
	return v.Code, v.PerUserLimit
}

// requireGateAnswer asserts that outcome is the case's answer as the gate
// gives it.
func requireGateAnswer(t *testing.T, c conformance.Case, j int, got voucher.GateOutcome) {
	t.Helper()
	want, or := c.Want[j].Gate()
	require.NotZero(t, want, "%s: request %d: %s has no gate outcome", c.Name, j, c.Want[j])
	if or != 0 && got == or {
		return
	}
	require.Equal(t, want.String(), got.String(), "%s: request %d (%s)", c.Name, j, c.Want[j])
}

// reserve.lua answers every case of the rule it decides as the conformance
// table says.
func TestConformanceScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	for i, c := range conformance.Cases {
		if c.Skips(conformance.Script) != "" {
			continue
		}
		code, perUser := setUpGateCase(t, g, i, c)
		for j, r := range c.Requests {
			h := requestHold(c, i, r)
			d, err := g.Reserve(ctx, code, perUser, h)
			require.NoError(t, err)
			requireGateAnswer(t, c, j, d.Outcome)
			if w := c.Want[j]; c.Voucher.Budget.Amount > 0 && d.Outcome == voucher.GateTaken && w.Discount != nil {
				// The gate fits a money budget itself: the discount it
				// took is the one the rule answers.
				if d.Discount > 0 {
					h.DiscountAmount = d.Discount
				}
				require.Equal(t, *w.Discount, h.DiscountAmount, "%s: request %d", c.Name, j)
			}
		}
	}
}

// reserve.lua answers every case it decides as the conformance table says
// when all of the case's requests are made by one call, as concurrent
// takes of one voucher are (takeQueues): one after the other, in order.
func TestConformanceScriptBatch(t *testing.T) {
	t.Parallel()
	g := newGate(t, Config{SoldOutTTL: -1})
	for i, c := range conformance.Cases {
		if c.Skips(conformance.Script) != "" {
			continue
		}
		code, perUser := setUpGateCase(t, g, i, c)
		holds := make([]voucher.Hold, len(c.Requests))
		batch := make([]*takeReq, len(c.Requests))
		for j, r := range c.Requests {
			holds[j] = requestHold(c, i, r)
			batch[j] = queuedTake(perUser, holds[j])
		}
		g.takeBatch(code, batch)
		for j, r := range batch {
			require.NoError(t, r.err, "%s: request %d", c.Name, j)
			requireGateAnswer(t, c, j, r.dec.Outcome)
			if w := c.Want[j]; c.Voucher.Budget.Amount > 0 && r.dec.Outcome == voucher.GateTaken && w.Discount != nil {
				d := holds[j].DiscountAmount
				if r.dec.Discount > 0 {
					d = r.dec.Discount
				}
				require.Equal(t, *w.Discount, d, "%s: request %d", c.Name, j)
			}
		}
	}
}

// The sold-out cache's copy of reserve.lua answers, from a copy of the
// orders Redis holds, every case of the rule asked of a sold-out voucher as
// the conformance table says.
func TestConformanceSoldOutCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	client, err := g.conn()
	require.NoError(t, err)
	ran := 0
	for i, c := range conformance.Cases {
		if c.Skips(conformance.SoldOutCache) != "" {
			continue
		}
		code, _ := setUpGateCase(t, g, i, c)
		k := keysFor(g.cfg.KeyPrefix, code)
		remaining, err := client.Do(ctx, client.B().Get().Key(k.remaining).Build()).AsInt64()
		require.NoError(t, err)
		spent, err := budgetSpent(client.Do(ctx, client.B().Hmget().Key(k.budget).Field("cap", "held").Build()))
		require.NoError(t, err)
		if remaining > 0 && !spent {
			continue // the cache holds sold-out vouchers (or spent budgets) only
		}
		orders, err := client.Do(ctx, client.B().Hgetall().Key(k.orders).Build()).AsStrMap()
		require.NoError(t, err)
		e := &soldOutEntry{orders: orders, codes: heldCodes(orders), budget: remaining > 0}
		for j, r := range c.Requests {
			d, ok := e.decide(conformance.OrderID(i, r.Order), r.Customer, caseCode(c, i, r.CodeIndex), false)
			require.True(t, ok, "%s: request %d: the copy cannot answer", c.Name, j)
			requireGateAnswer(t, c, j, d.Outcome)
		}
		ran++
	}
	require.GreaterOrEqual(t, ran, 4, "cases asked of a sold-out voucher")
}
