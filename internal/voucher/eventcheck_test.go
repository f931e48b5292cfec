package voucher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// checkStore answers Voucher from a map; the rest of Store is not used.
type checkStore struct {
	Store
	vouchers map[string]Voucher
}

func (s checkStore) Voucher(_ context.Context, code string) (Voucher, error) {
	v, ok := s.vouchers[code]
	if !ok {
		return Voucher{}, Errorf(CodeVoucherNotFound, "voucher %s not found", code)
	}
	return v, nil
}

func (s checkStore) VoucherDefinition(ctx context.Context, code string) (Voucher, error) {
	return s.Voucher(ctx, code)
}

// checkHistory answers DefinitionChanges from a list.
type checkHistory []DefinitionChange

func (h checkHistory) DefinitionChanges(_ context.Context, _ string, since time.Time) ([]DefinitionChange, error) {
	var out []DefinitionChange
	for _, ch := range h {
		if ch.At.After(since) {
			out = append(out, ch)
		}
	}
	return out, nil
}

func TestEventChecker(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	settled := Voucher{
		Code: "SALE", DiscountPercentBP: 1000, MaxDiscountAmount: 8000, MinOrderAmount: 1000, TotalLimit: 10, PerUserLimit: 1,
		FlashSale: true, StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour), UpdatedAt: now.Add(-time.Hour),
	}
	patched := settled
	patched.Code, patched.DiscountPercentBP, patched.UpdatedAt = "PATCHED", 2000, now.Add(-time.Second)
	standard := settled
	standard.Code, standard.FlashSale = "STD", false
	store := checkStore{vouchers: map[string]Voucher{"SALE": settled, "PATCHED": patched, "STD": standard}}

	event := func(code string, edit func(*ReservedEvent)) ReservedEvent {
		e := ReservedEvent{Version: EventVersion, Code: code, CustomerID: "c1", OrderID: "o1",
			OrderAmount: 50_000, DiscountAmount: 5000, ReservedAt: now, ExpiresAt: now.Add(15 * time.Minute)}
		if edit != nil {
			edit(&e)
		}
		return e
	}
	// stack is an event of SALE (5,000 on 50,000) then code (8,000 on
	// the 45,000 left), edited by edit.
	stack := func(code string, edit func(*ReservedEvent)) ReservedEvent {
		e := event("SALE", nil)
		e.Version, e.StackCustomerID = EventVersionStack, "c1"
		e.Members = []StackEventMember{
			{Code: "SALE", CustomerID: "c1", OrderID: "o1", OrderAmount: 50_000, DiscountAmount: 5000},
			{Code: code, CustomerID: "c1", OrderID: StackMemberOrderID("o1", 2), OrderAmount: 45_000, DiscountAmount: 8000},
		}
		if edit != nil {
			edit(&e)
		}
		return e
	}
	// PATCHED went from 10% to 20% a second ago, after 15% for a while
	// before.
	history := checkHistory{
		{At: now.Add(-time.Hour), Before: withPercent(patched, 1500), HasBefore: true, After: withPercent(patched, 1000)},
		{At: now.Add(-time.Second), Before: withPercent(patched, 1000), HasBefore: true, After: patched},
	}
	cases := []struct {
		name    string
		e       ReservedEvent
		history checkHistory // nil: none
		want    string
	}{
		{"agrees", event("SALE", nil), nil, ""},
		{"capped percentage", event("SALE", func(e *ReservedEvent) { e.OrderAmount, e.DiscountAmount = 200_000, 8000 }), nil, ""},
		{"doubled discount", event("SALE", func(e *ReservedEvent) { e.DiscountAmount = 10_000 }), nil, MismatchDiscount},
		{"discount past the cap", event("SALE", func(e *ReservedEvent) { e.OrderAmount, e.DiscountAmount = 200_000, 20_000 }), nil, MismatchDiscount},
		{"unknown voucher", event("GHOST", nil), nil, MismatchUnknownVoucher},
		{"standard voucher", event("STD", nil), nil, MismatchNotFlash},
		{"before the window", event("SALE", func(e *ReservedEvent) {
			e.ReservedAt, e.ExpiresAt = now.Add(-2*time.Hour), now.Add(-2*time.Hour+time.Minute)
		}), nil, MismatchWindow},
		{"below the minimum order", event("SALE", func(e *ReservedEvent) { e.OrderAmount, e.DiscountAmount = 900, 90 }), nil, MismatchOrderAmount},
		{"reserved in the future", event("SALE", func(e *ReservedEvent) {
			e.ReservedAt, e.ExpiresAt = now.Add(2*time.Minute), now.Add(3*time.Minute)
		}), nil, MismatchFuture},
		{"held past MaxHold", event("SALE", func(e *ReservedEvent) { e.ExpiresAt = now.Add(time.Hour + time.Second) }), nil, MismatchHoldTooLong},
		{"held exactly MaxHold", event("SALE", func(e *ReservedEvent) { e.ExpiresAt = now.Add(time.Hour) }), nil, ""},
		{"a replacement within MaxHold of its chain's start", event("SALE", func(e *ReservedEvent) {
			e.ReplacesOrderID, e.HeldSince = "o0", now.Add(-45*time.Minute)
		}), nil, ""},
		{"a replacement past MaxHold from its chain's start", event("SALE", func(e *ReservedEvent) {
			e.ReplacesOrderID, e.HeldSince = "o0", now.Add(-50*time.Minute)
		}), nil, MismatchHoldTooLong},
		{"a stack that agrees", stack("PATCHED", nil), nil, ""},
		{"a stack's second member: doubled discount", stack("PATCHED", func(e *ReservedEvent) { e.Members[1].DiscountAmount = 16_000 }), nil, MismatchDiscount},
		{"a stack's second member: standard voucher", stack("STD", nil), nil, MismatchNotFlash},
		{"a stack's second member: unknown voucher", stack("GHOST", nil), nil, MismatchUnknownVoucher},
		{"a stack held past MaxHold", stack("PATCHED", func(e *ReservedEvent) { e.ExpiresAt = now.Add(time.Hour + time.Second) }), nil, MismatchHoldTooLong},
		{"patched since: the new definition", event("PATCHED", func(e *ReservedEvent) { e.DiscountAmount = 8000 }), history, ""},
		{"patched since: the definition before", event("PATCHED", nil), history, ""},
		{"patched since: without history, the current definition decides", event("PATCHED", nil), nil, MismatchDiscount},
		{"patched since: an older definition", event("PATCHED", func(e *ReservedEvent) { e.DiscountAmount = 7500 }), history, MismatchDiscount},
		{"patched since: none of them", event("PATCHED", func(e *ReservedEvent) { e.DiscountAmount = 20_000 }), history, MismatchDiscount},
		{"patched after the reservation: the definition before", event("PATCHED", func(e *ReservedEvent) {
			e.ReservedAt, e.ExpiresAt = now.Add(-10*time.Second), now.Add(5*time.Minute)
		}), history, ""},
		{"patched after the reservation: not the one before the one before", event("PATCHED", func(e *ReservedEvent) {
			e.ReservedAt, e.ExpiresAt, e.DiscountAmount = now.Add(-10*time.Minute), now.Add(5*time.Minute), 7500
		}), history, MismatchDiscount},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := EventCheckConfig{Store: store, Staleness: time.Minute, Clock: func() time.Time { return now }}
			if tc.history != nil {
				cfg.History = tc.history
			}
			c, err := NewEventChecker(cfg)
			require.NoError(t, err)
			got, err := c.Check(context.Background(), []ReservedEvent{tc.e})
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.Equal(t, tc.want, got[0].Reason, got[0].String())
		})
	}
}

// A batch of stacks and singles gets one verdict per event, in order; a
// stack's verdict names its refused member.
func TestEventCheckerStackBatch(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sale := Voucher{Code: "SALE", DiscountAmount: 1000, TotalLimit: 10, PerUserLimit: 1, FlashSale: true,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour), UpdatedAt: now.Add(-time.Hour)}
	std := sale
	std.Code, std.FlashSale = "STD", false
	c, err := NewEventChecker(EventCheckConfig{Store: checkStore{vouchers: map[string]Voucher{"SALE": sale, "STD": std}},
		Clock: func() time.Time { return now }})
	require.NoError(t, err)
	single := func(code string) ReservedEvent {
		return ReservedEvent{Version: EventVersion, Code: code, CustomerID: "c1", OrderID: "single-" + code,
			OrderAmount: 5000, DiscountAmount: 1000, ReservedAt: now, ExpiresAt: now.Add(time.Minute)}
	}
	st := single("SALE")
	st.OrderID, st.Version, st.StackCustomerID = "stack", EventVersionStack, "c1"
	st.Members = []StackEventMember{
		{Code: "SALE", CustomerID: "c1", OrderID: "stack", OrderAmount: 5000, DiscountAmount: 1000},
		{Code: "STD", CustomerID: "c1", OrderID: StackMemberOrderID("stack", 2), OrderAmount: 4000, DiscountAmount: 1000},
	}
	got, err := c.Check(context.Background(), []ReservedEvent{single("SALE"), st, single("STD"), single("SALE")})
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Equal(t, []string{"", MismatchNotFlash, MismatchNotFlash, ""}, []string{got[0].Reason, got[1].Reason, got[2].Reason, got[3].Reason})
	require.Contains(t, got[1].Detail, "stack member STD")
}

func withPercent(v Voucher, bp int32) Voucher {
	v.DiscountPercentBP = bp
	return v
}

func TestDefinitionFromAudit(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []Voucher{
		{Code: "P", DiscountPercentBP: 1250, MaxDiscountAmount: 900, MinOrderAmount: 10, TotalLimit: 5, PerUserLimit: 1,
			StartsAt: at, EndsAt: at.Add(time.Hour), FlashSale: true},
		{Code: "F", DiscountAmount: 500, TotalLimit: 5, PerUserLimit: 2, StartsAt: at, EndsAt: at.Add(time.Hour), Disabled: true,
			CustomerIDNormalization: NormalizeEmail},
		{Code: "ONE", DiscountPercentBP: 1, TotalLimit: 1, PerUserLimit: 1, StartsAt: at, EndsAt: at.Add(time.Hour)},
		{Code: "ALL", DiscountPercentBP: 10_000, TotalLimit: 1, PerUserLimit: 1, StartsAt: at, EndsAt: at.Add(time.Hour)},
	} {
		got, err := DefinitionFromAudit(AuditFields(v))
		require.NoError(t, err)
		require.Equal(t, v, got)
	}
}

func TestReplacementUntil(t *testing.T) {
	t.Parallel()
	cfg := &ServiceConfig{ReservationTTL: 15 * time.Minute, MaxHold: time.Hour}
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	req := ReserveRequest{Code: "SALE", OrderID: "o2", ReplacesOrderID: "o1", CustomerID: "c"}
	for _, tc := range []struct {
		after time.Duration // from start to the replacement
		want  time.Duration // from start to its expiry; 0: refused
	}{
		{time.Minute, 16 * time.Minute},
		{45 * time.Minute, time.Hour},
		{50 * time.Minute, time.Hour},
		{time.Hour - time.Millisecond, time.Hour},
		{time.Hour, 0},
		{2 * time.Hour, 0},
	} {
		until, err := replacementUntil(cfg, req, start, start.Add(tc.after))
		if tc.want == 0 {
			require.True(t, IsCode(err, CodeReplacedOrderNotHeld), "%s: %v", tc.after, err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, start.Add(tc.want), until, tc.after)
	}
}

// StackOf: this fake holds no stacks.
func (checkStore) StackOf(context.Context, string) (string, bool, error) { return "", false, nil }
