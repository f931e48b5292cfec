package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// allVouchers walks every page of f and returns the codes in page order,
// failing on a repeated code.
func allVouchers(t *testing.T, s *pgstore.Store, f voucher.VoucherFilter, at time.Time) []string {
	t.Helper()
	var codes []string
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100)
		p, err := s.ListVouchers(context.Background(), f, at)
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Vouchers), f.Limit)
		for _, v := range p.Vouchers {
			require.False(t, seen[v.Code], "%s listed twice", v.Code)
			seen[v.Code] = true
			codes = append(codes, v.Code)
		}
		if p.Next == "" {
			return codes
		}
		require.Len(t, p.Vouchers, f.Limit, "a page before the last is full")
		f.After = p.Next
	}
}

func TestListVouchersFilters(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	window := func(from, to time.Duration) func(*voucher.Voucher) {
		return func(v *voucher.Voucher) { v.StartsAt, v.EndsAt = now.Add(from), now.Add(to) }
	}
	flash := func(v *voucher.Voucher) { v.FlashSale = true }
	// active: A-ACT1 (ends in 2h), A-ACT2 (ends in 1h, flash), B-ACT3 (ends in 3h)
	newVoucher(t, s, "A-ACT1", 5, 1, window(-time.Hour, 2*time.Hour))
	newVoucher(t, s, "A-ACT2", 5, 1, window(-time.Hour, time.Hour), flash)
	newVoucher(t, s, "B-ACT3", 5, 1, window(-time.Hour, 3*time.Hour))
	// scheduled: A-SCH1 (starts in 2h), B-SCH2 (starts in 1h, flash)
	newVoucher(t, s, "A-SCH1", 5, 1, window(2*time.Hour, 4*time.Hour))
	newVoucher(t, s, "B-SCH2", 5, 1, window(time.Hour, 4*time.Hour), flash)
	// ended: A-END1 (ended 2h ago), B-END2 (ended 1h ago)
	newVoucher(t, s, "A-END1", 5, 1, window(-3*time.Hour, -2*time.Hour))
	newVoucher(t, s, "B-END2", 5, 1, window(-3*time.Hour, -time.Hour))
	// disabled, inside its window: only in state=disabled.
	newVoucher(t, s, "A-DIS1", 5, 1, window(-time.Hour, time.Hour))
	off := false
	_, _, err := s.PatchVoucher(ctx, "A-DIS1", voucher.Patch{Active: &off})
	require.NoError(t, err)
	// codes differing only in case sort in byte order.
	newVoucher(t, s, "a-low", 5, 1, window(-time.Hour, time.Hour))

	yes, no := true, false
	for _, tc := range []struct {
		name string
		f    voucher.VoucherFilter
		want []string
	}{
		{"all by code", voucher.VoucherFilter{}, []string{"A-ACT1", "A-ACT2", "A-DIS1", "A-END1", "A-SCH1", "B-ACT3", "B-END2", "B-SCH2", "a-low"}},
		{"active, first to end first", voucher.VoucherFilter{State: voucher.StateActive}, []string{"A-ACT2", "a-low", "A-ACT1", "B-ACT3"}},
		{"scheduled, next to start first", voucher.VoucherFilter{State: voucher.StateScheduled}, []string{"B-SCH2", "A-SCH1"}},
		{"ended, last to end first", voucher.VoucherFilter{State: voucher.StateEnded}, []string{"B-END2", "A-END1"}},
		{"disabled", voucher.VoucherFilter{State: voucher.StateDisabled}, []string{"A-DIS1"}},
		{"flash", voucher.VoucherFilter{FlashSale: &yes}, []string{"A-ACT2", "B-SCH2"}},
		{"not flash, active", voucher.VoucherFilter{FlashSale: &no, State: voucher.StateActive}, []string{"a-low", "A-ACT1", "B-ACT3"}},
		{"prefix", voucher.VoucherFilter{CodePrefix: "A-"}, []string{"A-ACT1", "A-ACT2", "A-DIS1", "A-END1", "A-SCH1"}},
		{"prefix is case-sensitive", voucher.VoucherFilter{CodePrefix: "a"}, []string{"a-low"}},
		{"prefix and state", voucher.VoucherFilter{CodePrefix: "B", State: voucher.StateEnded}, []string{"B-END2"}},
		{"prefix and flash", voucher.VoucherFilter{CodePrefix: "A-A", FlashSale: &yes}, []string{"A-ACT2"}},
		{"nothing", voucher.VoucherFilter{CodePrefix: "Z"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{1, 2, 3, 100} {
				f := tc.f
				f.Limit = limit
				require.Equal(t, tc.want, allVouchers(t, s, f, now), "limit %d", limit)
			}
		})
	}

	p, err := s.ListVouchers(ctx, voucher.VoucherFilter{CodePrefix: "A-DIS", Limit: 10}, now)
	require.NoError(t, err)
	require.Len(t, p.Vouchers, 1)
	require.True(t, p.Vouchers[0].Disabled)
}

func TestListVouchersCounts(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	newVoucher(t, s, "COUNTS", 10, 5)
	for i := range 4 {
		_, err := s.Reserve(ctx, request("COUNTS", 1, fmt.Sprintf("o%d", i)), now, ttl)
		require.NoError(t, err)
	}
	_, err := s.Confirm(ctx, "COUNTS", "o0", now)
	require.NoError(t, err)
	_, _, err = s.Release(ctx, "COUNTS", "o1", now)
	require.NoError(t, err)
	p, err := s.ListVouchers(ctx, voucher.VoucherFilter{Limit: 10}, now)
	require.NoError(t, err)
	require.Len(t, p.Vouchers, 1)
	v := p.Vouchers[0]
	require.Equal(t, int32(2), v.Reserved)
	require.Equal(t, int32(1), v.Confirmed)
	require.Equal(t, int32(7), v.Remaining())
}

func TestListCursorsAreChecked(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	for _, c := range []string{"C1", "C2", "C3"} {
		newVoucher(t, s, c, 5, 1)
	}
	p, err := s.ListVouchers(ctx, voucher.VoucherFilter{Limit: 1}, now)
	require.NoError(t, err)
	require.NotEmpty(t, p.Next)
	for _, bad := range []string{"garbage!", "e30", p.Next + "x"} {
		_, err = s.ListVouchers(ctx, voucher.VoucherFilter{Limit: 1, After: bad}, now)
		requireCode(t, err, voucher.CodeInvalidRequest)
	}
	// A cursor of one listing is refused by another.
	_, err = s.ListVouchers(ctx, voucher.VoucherFilter{State: voucher.StateActive, Limit: 1, After: p.Next}, now)
	requireCode(t, err, voucher.CodeInvalidRequest)
	_, err = s.ListRedemptions(ctx, voucher.RedemptionFilter{Code: "C1", Limit: 1, After: p.Next})
	requireCode(t, err, voucher.CodeInvalidRequest)
	_, err = s.Audit(ctx, "C1", voucher.PageRequest{Limit: 1, After: p.Next})
	requireCode(t, err, voucher.CodeInvalidRequest)
}

// allRedemptions walks every page of f, running between(page) after each
// page but the last; it fails on a repeated orderId.
func allRedemptions(t *testing.T, s *pgstore.Store, f voucher.RedemptionFilter, between func(page int)) []voucher.Redemption {
	t.Helper()
	var out []voucher.Redemption
	seen := map[string]bool{}
	for page := 0; ; page++ {
		require.Less(t, page, 1000)
		p, err := s.ListRedemptions(context.Background(), f)
		require.NoError(t, err)
		for _, r := range p.Redemptions {
			require.False(t, seen[r.OrderID], "%s listed twice", r.OrderID)
			seen[r.OrderID] = true
			out = append(out, r)
		}
		if p.Next == "" {
			return out
		}
		if between != nil {
			between(page)
		}
		f.After = p.Next
	}
}

func orderIDs(list []voucher.Redemption) []string {
	ids := make([]string, len(list))
	for i, r := range list {
		ids[i] = r.OrderID
	}
	return ids
}

func TestListReservationsFilters(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	newVoucher(t, s, "RES", 100, 10)
	newVoucher(t, s, "OTHER", 100, 10)
	at := now
	reserve := func(code string, customer int64, id string) {
		at = at.Add(time.Second)
		_, err := s.Reserve(ctx, request(code, customer, id), at, ttl)
		require.NoError(t, err)
	}
	for i := range 9 {
		reserve("RES", int64(1+i%3), fmt.Sprintf("r%d", i))
		reserve("OTHER", int64(1+i%3), fmt.Sprintf("x%d", i))
	}
	for _, id := range []string{"r0", "r4"} {
		_, err := s.Confirm(ctx, "RES", id, at)
		require.NoError(t, err)
	}
	for _, id := range []string{"r1", "r5"} {
		_, _, err := s.Release(ctx, "RES", id, at)
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name string
		f    voucher.RedemptionFilter
		want []string
	}{
		{"all", voucher.RedemptionFilter{}, []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"}},
		{"reserved", voucher.RedemptionFilter{Status: voucher.StatusReserved}, []string{"r2", "r3", "r6", "r7", "r8"}},
		{"confirmed", voucher.RedemptionFilter{Status: voucher.StatusConfirmed}, []string{"r0", "r4"}},
		{"released", voucher.RedemptionFilter{Status: voucher.StatusReleased}, []string{"r1", "r5"}},
		{"customer", voucher.RedemptionFilter{CustomerID: "2"}, []string{"r1", "r4", "r7"}},
		{"customer and status", voucher.RedemptionFilter{CustomerID: "2", Status: voucher.StatusReserved}, []string{"r7"}},
		{"unknown customer", voucher.RedemptionFilter{CustomerID: "99"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{1, 2, 4, 100} {
				f := tc.f
				f.Code, f.Limit = "RES", limit
				require.Equal(t, tc.want, orderIDs(allRedemptions(t, s, f, nil)), "limit %d", limit)
			}
		})
	}

	// A customer's redemptions across vouchers, in time order.
	got := allRedemptions(t, s, voucher.RedemptionFilter{CustomerID: "3", Limit: 2}, nil)
	require.Equal(t, []string{"r2", "x2", "r5", "x5", "r8", "x8"}, orderIDs(got))
}

// Rows inserted between pages never make a page repeat or skip a row that
// was there from the start; those inserted after the cursor's position are
// listed on later pages.
func TestListReservationsAcrossInserts(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	newVoucher(t, s, "PAGES", 1000, 1000)
	at := now
	var initial []string
	for i := range 20 {
		at = at.Add(time.Millisecond)
		id := fmt.Sprintf("a%02d", i)
		_, err := s.Reserve(ctx, request("PAGES", 1, id), at, ttl)
		require.NoError(t, err)
		initial = append(initial, id)
	}
	var added []string
	got := allRedemptions(t, s, voucher.RedemptionFilter{Code: "PAGES", Limit: 3}, func(page int) {
		for j := range 2 {
			// One later than everything, one at an instant already listed
			// (Kafka mode writes rows with the gate's time).
			at = at.Add(time.Millisecond)
			later := fmt.Sprintf("b%02d-%d", page, j)
			_, err := s.Reserve(ctx, request("PAGES", 1, later), at, ttl)
			require.NoError(t, err)
			added = append(added, later)
		}
		_, err := s.Reserve(ctx, request("PAGES", 1, fmt.Sprintf("c%02d", page)), now, ttl)
		require.NoError(t, err)
	})
	ids := orderIDs(got)
	for _, id := range append(initial, added...) {
		require.Contains(t, ids, id)
	}
	require.True(t, sort.SliceIsSorted(got, func(i, j int) bool {
		a, b := got[i], got[j]
		return a.CreatedAt.Before(b.CreatedAt) || (a.CreatedAt.Equal(b.CreatedAt) && a.OrderID < b.OrderID)
	}), "pages in (createdAt, orderId) order")
}

func TestDisabledVoucherRefusesReservations(t *testing.T) {
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		v := newVoucher(t, s, "STOP", 10, 5)
		_, err := s.Reserve(ctx, request("STOP", 1, "held"), now, ttl)
		require.NoError(t, err)
		_, err = s.Reserve(ctx, request("STOP", 1, "held2"), now, ttl)
		require.NoError(t, err)
		off, on := false, true
		before, after, err := s.PatchVoucher(ctx, "STOP", voucher.Patch{Active: &off})
		require.NoError(t, err)
		require.False(t, before.Disabled)
		require.True(t, after.Disabled)
		require.Equal(t, v.StartsAt, after.StartsAt, "the window is kept")
		require.Equal(t, v.EndsAt, after.EndsAt, "the window is kept")

		_, err = s.Reserve(ctx, request("STOP", 2, "new"), now, ttl)
		require.Equal(t, voucher.ReasonDisabled, requireCode(t, err, voucher.CodeNotEligible).Reason)
		// The batch function refuses too, element by element.
		answers, err := reserveBatchSQL(ctx, s, "STOP", now, []elem{el(3, "b1"), el(4, "b2")})
		require.NoError(t, err)
		for _, a := range answers {
			require.Equal(t, voucher.CodeNotEligible, a.Code)
			require.Equal(t, voucher.ReasonDisabled, a.Reason)
		}
		// A replay of a known order still answers with its row.
		res, err := s.Reserve(ctx, request("STOP", 1, "held"), now, ttl)
		require.NoError(t, err)
		require.True(t, res.Replay)
		// Holds already made may be confirmed or released.
		_, err = s.Confirm(ctx, "STOP", "held", now)
		require.NoError(t, err)
		_, released, err := s.Release(ctx, "STOP", "held2", now)
		require.NoError(t, err)
		require.True(t, released)

		_, _, err = s.PatchVoucher(ctx, "STOP", voucher.Patch{Active: &on})
		require.NoError(t, err)
		_, err = s.Reserve(ctx, request("STOP", 2, "again"), now, ttl)
		require.NoError(t, err)
	})
}

// A deactivation committed while a reservation is between its read of the
// voucher and its update of the row wins: the reservation is refused.
func TestDeactivationWinsOverAReservationInFlight(t *testing.T) {
	t.Parallel()
	s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	ctx := context.Background()
	newVoucher(t, s, "RACE", 10, 5)
	// Hold the customer's counter so the reservation stops at step f, after
	// it read the voucher as active.
	tx := lockCounter(t, s, "RACE", 7)
	done := make(chan error, 1)
	go func() {
		_, err := s.Reserve(ctx, request("RACE", 7, "inflight"), now, ttl)
		done <- err
	}()
	eventually(t, "the reservation waits for the counter", func() bool {
		var n int
		require.NoError(t, s.Pool().QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%voucherd_reserve%'`).Scan(&n))
		return n > 0
	})
	off := false
	_, _, err := s.PatchVoucher(ctx, "RACE", voucher.Patch{Active: &off})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	err = <-done
	require.Equal(t, voucher.ReasonDisabled, requireCode(t, err, voucher.CodeNotEligible).Reason)
}

func TestAuditTrail(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := voucher.WithActor(context.Background(), "promo-team")
	_, err := s.CreateVoucher(ctx, voucher.Voucher{Code: "AUD", DiscountAmount: 100, TotalLimit: 5, PerUserLimit: 1,
		StartsAt: base, EndsAt: base.Add(time.Hour)})
	require.NoError(t, err)
	_, err = s.Reserve(ctx, request("AUD", 1, "o1"), base.Add(time.Minute), ttl)
	require.NoError(t, err)
	limit := int32(8)
	_, _, err = s.PatchVoucher(ctx, "AUD", voucher.Patch{TotalLimit: &limit})
	require.NoError(t, err)
	off, on := false, true
	_, _, err = s.PatchVoucher(voucher.WithActor(context.Background(), "support"), "AUD", voucher.Patch{Active: &off})
	require.NoError(t, err)
	_, _, err = s.PatchVoucher(context.Background(), "AUD", voucher.Patch{Active: &on})
	require.NoError(t, err)
	// A refused change records nothing: the entry is in its transaction.
	zero := int32(0)
	_, _, err = s.PatchVoucher(ctx, "AUD", voucher.Patch{TotalLimit: &zero})
	require.Error(t, err)
	_, err = s.CreateVoucher(ctx, voucher.Voucher{Code: "AUD", DiscountAmount: 100, TotalLimit: 5, PerUserLimit: 1,
		StartsAt: base, EndsAt: base.Add(time.Hour)})
	requireCode(t, err, voucher.CodeVoucherExists)
	require.NoError(t, s.RecordAudit(ctx, voucher.AuditEntry{Code: "AUD", Action: voucher.AuditReconcile,
		KeyName: "system", After: json.RawMessage(`{"repaired":true}`)}))

	var entries []voucher.AuditEntry
	p := voucher.PageRequest{Limit: 2}
	for {
		page, err := s.Audit(ctx, "AUD", p)
		require.NoError(t, err)
		entries = append(entries, page.Entries...)
		if page.Next == "" {
			break
		}
		p.After = page.Next
	}
	var got []string
	for _, e := range entries {
		got = append(got, string(e.Action)+" by "+e.KeyName)
	}
	require.Equal(t, []string{"create by promo-team", "patch by promo-team", "deactivate by support",
		"activate by system", "reconcile by system"}, got)
	require.Nil(t, entries[0].Before)
	fields := func(raw json.RawMessage) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		return m
	}
	require.Equal(t, 5.0, fields(entries[1].Before)["totalLimit"])
	require.Equal(t, 8.0, fields(entries[1].After)["totalLimit"])
	require.Equal(t, true, fields(entries[2].Before)["active"])
	require.Equal(t, false, fields(entries[2].After)["active"])
	for _, e := range entries {
		require.False(t, strings.Contains(string(e.After), "secret"))
		require.WithinDuration(t, time.Now(), e.At, time.Minute)
	}
}
