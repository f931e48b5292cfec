package voucher

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every gate outcome, in every mode it can reach, through Service.Reserve:
// the answer's code, its replay and OutcomeUnknown flags, and what went
// back to the gate, to the store and to Kafka.
func TestReserveAnswersEveryGateOutcome(t *testing.T) {
	t.Parallel()
	now := time.Now()
	hold := func(pending bool, age time.Duration) Hold {
		at := now.Add(-age).Truncate(time.Millisecond)
		return Hold{OrderID: "o-1", CustomerID: "7", OrderAmount: 100, DiscountAmount: 1,
			ReservedAt: at, ExpiresAt: at.Add(time.Hour), Pending: pending}
	}
	row := Redemption{OrderID: "o-1", VoucherCode: "SALE", CustomerID: "7", OrderAmount: 100,
		Status: StatusReserved, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	gateDown := Unavailable(errors.New("connection refused"), "redis reserve")
	standard := flashVoucher()
	standard.FlashSale = false
	// A flash campaign whose code is SALE: the gate keys it under the
	// budget's id, the hold and the store's row carry SALE.
	budget := flashVoucher()
	budget.Code, budget.Campaign = "cmp_SALE", true
	campaignHold := func() Hold { h := hold(false, time.Minute); h.Code = "SALE"; return h }
	releasedRow := row
	releasedRow.Status = StatusReleased
	confirmedRow := row
	confirmedRow.Status = StatusConfirmed
	otherRow := row
	otherRow.CustomerID = "8"

	type want struct {
		code      ErrorCode // "" for a reservation
		replay    bool
		unknown   bool
		releases  []ReleaseMode // what was given back to the gate, in order
		commits   int           // holds marked durable in the gate
		reserves  int           // Store.Reserve calls (standard path)
		published int           // events sent to Kafka
		abandoned int           // orders fenced in the store
		warmups   int           // snapshots loaded into the gate
		stock     bool          // the answer says what the gate has left
	}
	for _, tc := range []struct {
		name     string
		mode     FlashWrites
		voucher  Voucher
		fallback bool
		decision GateDecision
		gateErr  error
		rows     []Redemption
		caughtUp error
		want     want
	}{
		{name: "standard voucher never asks the gate", mode: FlashSync, voucher: standard,
			decision: GateDecision{Outcome: GateSoldOut}, want: want{reserves: 1}},

		{name: "campaign code held by another order", mode: FlashSync, voucher: budget,
			decision: GateDecision{Outcome: GateCodeUsed}, want: want{code: CodeAlreadyUsed}},
		{name: "campaign replay released in the store", mode: FlashKafka, voucher: budget,
			decision: GateDecision{Outcome: GateReplay, Hold: campaignHold()}, rows: []Redemption{releasedRow},
			want: want{code: CodeOrderReleased}},
		{name: "campaign replay before the consumer", mode: FlashKafka, voucher: budget,
			decision: GateDecision{Outcome: GateReplay, Hold: campaignHold()}, want: want{replay: true}},
		{name: "taken", mode: FlashSync, decision: GateDecision{Outcome: GateTaken, Remaining: 9},
			want: want{reserves: 1}},
		{name: "taken", mode: FlashKafka, decision: GateDecision{Outcome: GateTaken, Remaining: 9},
			want: want{commits: 1, published: 1, stock: true}},

		{name: "replay", mode: FlashSync, decision: GateDecision{Outcome: GateReplay, Hold: hold(false, 0)},
			rows: []Redemption{row}, want: want{replay: true, reserves: 1}},
		{name: "replay of a durable hold, no row yet", mode: FlashKafka,
			decision: GateDecision{Outcome: GateReplay, Hold: hold(false, 0)}, want: want{replay: true}},
		{name: "replay of a durable hold with its row", mode: FlashKafka,
			decision: GateDecision{Outcome: GateReplay, Hold: hold(false, 0)}, rows: []Redemption{row}, want: want{replay: true}},
		{name: "replay of a pending hold whose row arrived", mode: FlashKafka,
			decision: GateDecision{Outcome: GateReplay, Hold: hold(true, 0)}, rows: []Redemption{row},
			want: want{replay: true, commits: 1}},
		{name: "replay of a young pending hold without a row", mode: FlashKafka,
			decision: GateDecision{Outcome: GateReplay, Hold: hold(true, 0)},
			want:     want{code: CodeUnavailable, unknown: true}},
		{name: "replay of an orphaned pending hold", mode: FlashKafka,
			decision: GateDecision{Outcome: GateReplay, Hold: hold(true, time.Hour)},
			want:     want{code: CodeOrderReleased, releases: []ReleaseMode{ReleaseMark}, abandoned: 1}},
		{name: "replay of a pending hold, consumer behind", mode: FlashKafka, caughtUp: errors.New("behind"),
			decision: GateDecision{Outcome: GateReplay, Hold: hold(true, time.Hour)},
			want:     want{code: CodeUnavailable, unknown: true}},

		{name: "conflict", mode: FlashSync, decision: GateDecision{Outcome: GateConflict},
			want: want{code: CodeOrderConflict}},
		{name: "conflict", mode: FlashKafka, decision: GateDecision{Outcome: GateConflict},
			want: want{code: CodeOrderConflict}},
		{name: "released", mode: FlashSync, decision: GateDecision{Outcome: GateReleased},
			want: want{code: CodeOrderReleased}},
		{name: "released", mode: FlashKafka, decision: GateDecision{Outcome: GateReleased},
			want: want{code: CodeOrderReleased}},
		// In sync mode the gate marks an order released ahead of the
		// store (a replacement taking its use over, undone when its write
		// is refused): the store's row answers.
		{name: "released, order held in the store", mode: FlashSync, decision: GateDecision{Outcome: GateReleased},
			rows: []Redemption{confirmedRow}, want: want{replay: true}},
		{name: "released, order released in the store", mode: FlashSync, decision: GateDecision{Outcome: GateReleased},
			rows: []Redemption{releasedRow}, want: want{code: CodeOrderReleased}},
		{name: "released, order another customer's in the store", mode: FlashSync, decision: GateDecision{Outcome: GateReleased},
			rows: []Redemption{otherRow}, want: want{code: CodeOrderConflict}},
		{name: "released, order held in the store", mode: FlashKafka, decision: GateDecision{Outcome: GateReleased},
			rows: []Redemption{confirmedRow}, want: want{code: CodeOrderReleased}},
		{name: "quota held", mode: FlashSync, decision: GateDecision{Outcome: GateQuotaHeld},
			want: want{code: CodeAlreadyUsed}},
		{name: "quota held", mode: FlashKafka, decision: GateDecision{Outcome: GateQuotaHeld},
			want: want{code: CodeAlreadyUsed}},
		{name: "sold out", mode: FlashSync, decision: GateDecision{Outcome: GateSoldOut},
			want: want{code: CodeOutOfStock}},
		{name: "sold out", mode: FlashKafka, decision: GateDecision{Outcome: GateSoldOut},
			want: want{code: CodeOutOfStock}},

		// Not loaded after the warm-ups: sync mode takes the standard path,
		// Kafka mode cannot tell whether events are still on their way.
		{name: "not loaded", mode: FlashSync, decision: GateDecision{Outcome: GateNotLoaded},
			want: want{reserves: 1, warmups: notLoadedWarmups}},
		{name: "not loaded", mode: FlashKafka, decision: GateDecision{Outcome: GateNotLoaded},
			want: want{code: CodeUnavailable, unknown: true, warmups: notLoadedWarmups}},

		{name: "gate error", mode: FlashSync, gateErr: gateDown, want: want{code: CodeUnavailable}},
		{name: "gate error with fallback", mode: FlashSync, fallback: true, gateErr: gateDown,
			want: want{reserves: 1}},
		{name: "gate error, order in the store", mode: FlashSync, gateErr: gateDown, rows: []Redemption{row},
			want: want{replay: true}},
		{name: "gate error", mode: FlashKafka, gateErr: gateDown, want: want{code: CodeUnavailable}},
		{name: "gate error, fallback ignored", mode: FlashKafka, fallback: true, gateErr: gateDown,
			want: want{code: CodeUnavailable}},
		{name: "gate error, consumer behind", mode: FlashKafka, gateErr: gateDown, caughtUp: errors.New("behind"),
			want: want{code: CodeUnavailable, unknown: true}},
		{name: "gate error, order in the store", mode: FlashKafka, gateErr: gateDown, rows: []Redemption{row},
			want: want{replay: true}},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.mode, tc.name), func(t *testing.T) {
			t.Parallel()
			v := tc.voucher
			if v.Code == "" {
				v = flashVoucher()
			}
			st := &fakeStore{voucher: v, holds: HoldSummary{TotalLimit: v.TotalLimit, UsedCount: v.TotalLimit},
				rows: map[string]Redemption{}}
			for _, r := range tc.rows {
				st.rows[r.OrderID] = r
			}
			g := &fakeGate{decision: tc.decision, err: tc.gateErr}
			log := &fakeLog{caughtUpErr: tc.caughtUp}
			cfg := ServiceConfig{Store: st, Gate: g, FlashWrites: tc.mode, FlashFallback: tc.fallback}
			if tc.mode == FlashKafka {
				cfg.Events = log
			}
			svc, err := NewService(cfg)
			require.NoError(t, err)

			res, err := svc.Reserve(context.Background(), reserveReq("o-1"))
			if tc.want.code == "" {
				require.NoError(t, err)
				require.Equal(t, "o-1", res.OrderID)
				require.Equal(t, "7", res.CustomerID)
			} else {
				require.True(t, IsCode(err, tc.want.code), "want %s, got %v", tc.want.code, err)
			}
			require.Equal(t, tc.want.replay, res.Replay)
			require.Equal(t, tc.want.unknown, IsOutcomeUnknown(err), "%v", err)
			require.Equal(t, tc.want.releases, g.released(), "given back to the gate")
			require.Equal(t, tc.want.commits, g.commits, "holds committed")
			require.Equal(t, tc.want.reserves, st.reserves, "standard-path writes")
			require.Len(t, log.published, tc.want.published, "events published")
			require.Len(t, st.abandoned, tc.want.abandoned, "orders fenced")
			require.Equal(t, tc.want.warmups, g.loads, "warm-ups")
			if tc.want.stock {
				require.Equal(t, &Stock{Remaining: 9, TotalLimit: v.TotalLimit}, res.Taken)
			}
		})
	}
}

// validatingGate is fakeGate whose validations get its decision too.
type validatingGate struct{ fakeGate }

func (g *validatingGate) Validate(context.Context, string, int32, string, string, string, TakeLimits) (GateDecision, error) {
	return g.decision, g.err
}

// A validation of an orderId the gate marks released is answered as the
// reservation is: in sync mode from the store's row, in Kafka mode from
// the gate.
func TestValidationOfAnOrderTheGateMarksReleased(t *testing.T) {
	t.Parallel()
	now := time.Now()
	row := Redemption{OrderID: "o-1", VoucherCode: "SALE", CustomerID: "7", OrderAmount: 100, DiscountAmount: 1,
		Status: StatusConfirmed, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	released := row
	released.Status = StatusReleased
	for _, tc := range []struct {
		name string
		mode FlashWrites
		row  Redemption
		want Validation
	}{
		{"sync/held in the store", FlashSync, row, Validation{Valid: true, Replay: true, DiscountAmount: 1}},
		{"sync/released in the store", FlashSync, released, Validation{Code: CodeOrderReleased}},
		{"kafka/held in the store", FlashKafka, row, Validation{Code: CodeOrderReleased}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{voucher: flashVoucher(), rows: map[string]Redemption{"o-1": tc.row}}
			cfg := ServiceConfig{Store: st, Gate: &validatingGate{fakeGate{decision: GateDecision{Outcome: GateReleased}}}, FlashWrites: tc.mode}
			if tc.mode == FlashKafka {
				cfg.Events = &fakeLog{}
			}
			svc, err := NewService(cfg)
			require.NoError(t, err)
			v, err := svc.Validate(context.Background(), ValidateRequest{Code: "SALE", CustomerID: "7", OrderID: "o-1", OrderAmount: 100})
			require.NoError(t, err)
			require.Equal(t, tc.want.Valid, v.Valid, "%+v", v)
			require.Equal(t, tc.want.Replay, v.Replay, "%+v", v)
			require.Equal(t, tc.want.DiscountAmount, v.DiscountAmount, "%+v", v)
			require.Equal(t, tc.want.Code, v.Code, "%+v", v)
		})
	}
}
