package voucher

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDisabledIsNotEligible(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	v := Voucher{Code: "C", StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour), MinOrderAmount: 10}
	require.NoError(t, v.CheckEligible(Purchase{Amount: 10}, now))
	v.Disabled = true
	for _, amount := range []int64{10, 0} {
		err := v.CheckEligible(Purchase{Amount: amount}, now)
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, CodeNotEligible, e.Code)
		require.Equal(t, ReasonDisabled, e.Reason, "disabled is told before any other reason")
	}
	// Outside its window a disabled voucher says DISABLED too.
	err := v.CheckEligible(Purchase{Amount: 10}, now.Add(2*time.Hour))
	require.Equal(t, ReasonDisabled, err.(*Error).Reason)
}

func TestPatchActive(t *testing.T) {
	t.Parallel()
	v := Voucher{Code: "C", DiscountAmount: 1, TotalLimit: 1, PerUserLimit: 1,
		StartsAt: time.Unix(0, 0), EndsAt: time.Unix(10, 0)}
	off, on := false, true
	got, err := Patch{Active: &off}.Apply(v)
	require.NoError(t, err)
	require.True(t, got.Disabled)
	require.Equal(t, v.StartsAt, got.StartsAt)
	require.Equal(t, v.EndsAt, got.EndsAt)
	got, err = Patch{Active: &on}.Apply(got)
	require.NoError(t, err)
	require.False(t, got.Disabled)
	require.False(t, Patch{Active: &off}.Empty())

	limit := int32(3)
	require.Equal(t, AuditDeactivate, PatchAction(Patch{Active: &off}))
	require.Equal(t, AuditActivate, PatchAction(Patch{Active: &on}))
	require.Equal(t, AuditPatch, PatchAction(Patch{Active: &off, TotalLimit: &limit}))
	require.Equal(t, AuditPatch, PatchAction(Patch{TotalLimit: &limit}))
}

func TestAuditFieldsAndActor(t *testing.T) {
	t.Parallel()
	var m map[string]any
	require.NoError(t, json.Unmarshal(AuditFields(Voucher{Code: "C", TotalLimit: 4, Disabled: true, UsedCount: 3}), &m))
	require.Equal(t, "C", m["code"])
	require.Equal(t, 4.0, m["totalLimit"])
	require.Equal(t, false, m["active"])
	require.NotContains(t, m, "usedCount", "counters are not settings")

	require.Equal(t, SystemActor, ActorOf(context.Background()))
	require.Equal(t, "ops", ActorOf(WithActor(context.Background(), "ops")))
}

func TestListingArgumentsAreChecked(t *testing.T) {
	t.Parallel()
	// No store: every call must be refused before reaching it.
	svc := &Service{deps: &deps{cfg: ServiceConfig{Clock: time.Now}}}
	ctx := context.Background()
	for _, f := range []VoucherFilter{{Limit: -1}, {Limit: MaxPageLimit + 1}, {State: "soon"}, {CodePrefix: "a b"}} {
		_, err := svc.ListVouchers(ctx, f)
		require.Equal(t, CodeInvalidRequest, CodeOf(err), "%+v", f)
	}
	_, err := svc.ListReservations(ctx, RedemptionFilter{Code: "C", Status: "GONE"})
	require.Equal(t, CodeInvalidRequest, CodeOf(err))
	_, err = svc.CustomerRedemptions(ctx, "a b", PageRequest{})
	require.Equal(t, CodeInvalidRequest, CodeOf(err))
	_, err = svc.Audit(ctx, "C", PageRequest{Limit: 5000})
	require.Equal(t, CodeInvalidRequest, CodeOf(err))
}
