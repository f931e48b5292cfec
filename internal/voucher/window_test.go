package voucher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func berlin(t *testing.T) *time.Location {
	t.Helper()
	l, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	return l
}

func TestScheduleOccurrenceAcrossDST(t *testing.T) {
	t.Parallel()
	utc := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return tm
	}
	every := []string{"MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"}
	at := func(from, to string) Schedule {
		return Schedule{TimeZone: "Europe/Berlin", Windows: []Window{{Days: every, From: from, To: to}}}
	}
	cases := []struct {
		name  string
		s     Schedule
		now   string
		start string // "" for no occurrence
		end   string
		next  string
	}{
		// 2026-03-29: Berlin's clocks go from 02:00 CET to 03:00 CEST (01:00Z).
		{"spring 02-03 has no occurrence", at("02:00", "03:00"), "2026-03-29T01:00:00Z", "", "", "2026-03-30T00:00:00Z"},
		{"spring 02-03 before the gap", at("02:00", "03:00"), "2026-03-29T00:30:00Z", "", "", "2026-03-30T00:00:00Z"},
		{"spring 01:30-02:30 is cut at the gap", at("01:30", "02:30"), "2026-03-29T00:45:00Z",
			"2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T23:30:00Z"},
		{"spring 02:30-04:00 starts when the clock jumps", at("02:30", "04:00"), "2026-03-29T01:10:00Z",
			"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "2026-03-30T00:30:00Z"},
		{"spring 03-04 is an hour", at("03:00", "04:00"), "2026-03-29T01:00:00Z",
			"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "2026-03-30T01:00:00Z"},
		// 2026-10-25: from 03:00 CEST back to 02:00 CET (01:00Z).
		{"autumn 02-03 lasts two hours, first pass", at("02:00", "03:00"), "2026-10-25T00:10:00Z",
			"2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-26T01:00:00Z"},
		{"autumn 02-03 lasts two hours, second pass", at("02:00", "03:00"), "2026-10-25T01:50:00Z",
			"2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-26T01:00:00Z"},
		{"autumn 01:00-02:30 ends at the first 02:30", at("01:00", "02:30"), "2026-10-25T01:10:00Z",
			"", "", "2026-10-26T00:00:00Z"},
		{"autumn 01:00-02:30 inside", at("01:00", "02:30"), "2026-10-25T00:10:00Z",
			"2026-10-24T23:00:00Z", "2026-10-25T00:30:00Z", "2026-10-26T00:00:00Z"},
		{"a day ending at 24:00", at("22:00", "24:00"), "2026-10-25T22:59:00Z",
			"2026-10-25T21:00:00Z", "2026-10-25T23:00:00Z", "2026-10-26T21:00:00Z"},
		{"weekdays only: Saturday waits for Monday", Schedule{TimeZone: "Europe/Berlin",
			Windows: []Window{{Days: []string{"MON", "WED", "FRI"}, From: "13:00", To: "14:00"}}},
			"2026-12-05T12:30:00Z", "", "", "2026-12-07T12:00:00Z"},
		{"Friday's occurrence", Schedule{TimeZone: "Europe/Berlin",
			Windows: []Window{{Days: []string{"MON", "WED", "FRI"}, From: "13:00", To: "14:00"}}},
			"2026-12-04T12:59:59Z", "2026-12-04T12:00:00Z", "2026-12-04T13:00:00Z", "2026-12-07T12:00:00Z"},
		{"the week's only window skipped by the spring change: the week after", Schedule{TimeZone: "Europe/Berlin",
			Windows: []Window{{Days: []string{"SUN"}, From: "02:00", To: "03:00"}}},
			"2026-03-23T12:00:00Z", "", "", "2026-04-05T00:00:00Z"},
		{"another zone", Schedule{TimeZone: "America/New_York",
			Windows: []Window{{Days: []string{"SAT"}, From: "09:00", To: "10:00"}}},
			"2026-12-05T14:30:00Z", "2026-12-05T14:00:00Z", "2026-12-05T15:00:00Z", "2026-12-12T14:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, c.s.Validate())
			now := utc(c.now)
			o := c.s.At(now)
			if c.start == "" {
				require.True(t, o.Zero(), "occurrence %v", o)
			} else {
				require.Equal(t, utc(c.start), o.Start.UTC())
				require.Equal(t, utc(c.end), o.End.UTC())
			}
			require.Equal(t, utc(c.next), c.s.Next(now).UTC())
		})
	}
}

func TestFirstAtOrAfter(t *testing.T) {
	t.Parallel()
	loc := berlin(t)
	day := func(m time.Month, d int) time.Time { return time.Date(2026, m, d, 12, 0, 0, 0, time.UTC) }
	cases := []struct {
		day    time.Time
		minute int
		want   string
	}{
		{day(3, 29), 120, "2026-03-29T01:00:00Z"},  // in the gap: when the clock jumps
		{day(3, 29), 150, "2026-03-29T01:00:00Z"},  // in the gap
		{day(3, 29), 180, "2026-03-29T01:00:00Z"},  // 03:00 CEST
		{day(3, 29), 60, "2026-03-29T00:00:00Z"},   // 01:00 CET
		{day(10, 25), 150, "2026-10-25T00:30:00Z"}, // twice: the first
		{day(10, 25), 180, "2026-10-25T02:00:00Z"}, // 03:00 CET
		{day(10, 25), 24 * 60, "2026-10-25T23:00:00Z"},
	}
	for _, c := range cases {
		got := firstAtOrAfter(loc, c.day, c.minute)
		require.Equal(t, c.want, got.UTC().Format(time.RFC3339), "day %s minute %d", c.day, c.minute)
	}
}

func TestScheduleValidate(t *testing.T) {
	t.Parallel()
	ok := Window{Days: []string{"MON"}, From: "13:00", To: "14:00"}
	bad := []Schedule{
		{TimeZone: "", Windows: []Window{ok}},
		{TimeZone: "Local", Windows: []Window{ok}},
		{TimeZone: "Mars/Olympus", Windows: []Window{ok}},
		{TimeZone: "UTC"},
		{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON", "MON"}, From: "13:00", To: "14:00"}}},
		{TimeZone: "UTC", Windows: []Window{{Days: []string{"mon"}, From: "13:00", To: "14:00"}}},
		{TimeZone: "UTC", Windows: []Window{{Days: nil, From: "13:00", To: "14:00"}}},
		{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "14:00", To: "13:00"}}},
		{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "22:00", To: "02:00"}}},
		{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "13:00", To: "13:00"}}},
		{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "24:00", To: "24:00"}}},
		{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "1:00", To: "14:00"}}},
		{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "13:60", To: "14:00"}}},
		{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "13:00", To: "24:01"}}},
		{TimeZone: "UTC", Windows: []Window{ok, {Days: []string{"TUE", "MON"}, From: "13:30", To: "15:00"}}},
	}
	for _, s := range bad {
		var e *Error
		require.ErrorAs(t, s.Validate(), &e, "%v", s)
		require.Equal(t, CodeInvalidRequest, e.Code)
	}
	good := []Schedule{
		{TimeZone: "UTC", Windows: []Window{ok}},
		{TimeZone: "Europe/Berlin", Windows: []Window{ok, {Days: []string{"MON"}, From: "14:00", To: "24:00"}}},
		{TimeZone: "Asia/Kolkata", Windows: []Window{{Days: []string{"SUN", "SAT"}, From: "00:00", To: "24:00"}}},
	}
	for _, s := range good {
		require.NoError(t, s.Validate(), "%v", s)
	}
}

func TestVoucherOutsideWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 30, 0, 0, time.UTC) // a Saturday
	v := Voucher{Code: "W", DiscountAmount: 100, TotalLimit: 10, PerUserLimit: 1,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(30 * 24 * time.Hour),
		Schedule: &Schedule{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "09:00", To: "10:00"}}}, WindowLimit: 5}
	require.NoError(t, v.Validate())
	err := v.CheckEligible(Purchase{Amount: 1000, CustomerID: "c"}, now)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonOutsideWindow, e.Reason)
	require.Equal(t, time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC), e.NextWindowAt.UTC())
	require.NoError(t, v.CheckEligible(Purchase{Amount: 1000, CustomerID: "c"}, time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC)))

	v.WindowLimit = 0
	v.Schedule = nil
	_, err = Patch{WindowLimit: new(int32(3))}.Apply(v)
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeWindowNotSet, e.Code)
	v.WindowLimit = 2
	_, err = Patch{WindowLimit: new(int32(3))}.Apply(v)
	require.Error(t, err) // windowLimit needs a schedule

	full := Reject(CodeHeldOut, "", Facts{Voucher: "W", Window: true, NextWindowAt: now, RetryAfter: time.Minute})
	require.Equal(t, LimitWindow, full.Limit)
	require.Equal(t, now, full.NextWindowAt)
	require.Equal(t, LimitTotal, Reject(CodeOutOfStock, "", Facts{Voucher: "W"}).Limit)
}

// The consumer's check refuses an event whose occurrence is not the one
// the voucher's windows give at its reservedAt: another occurrence, none
// for a windowed voucher, one for a voucher without windows.
func TestEventCheckerOccurrence(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC) // a Monday
	sched := &Schedule{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "09:00", To: "10:00"}}}
	win := Voucher{Code: "WIN", DiscountAmount: 500, TotalLimit: 10, PerUserLimit: 1, FlashSale: true,
		StartsAt: now.Add(-48 * time.Hour), EndsAt: now.Add(48 * time.Hour), UpdatedAt: now.Add(-48 * time.Hour),
		Schedule: sched, WindowLimit: 5}
	plain := win
	plain.Code, plain.Schedule, plain.WindowLimit = "PLAIN", nil, 0
	c, err := NewEventChecker(EventCheckConfig{Store: checkStore{vouchers: map[string]Voucher{"WIN": win, "PLAIN": plain}},
		Clock: func() time.Time { return now }})
	require.NoError(t, err)
	o := win.Occurrence(now).Start
	ev := func(code string, at, window time.Time) ReservedEvent {
		return ReservedEvent{Version: EventVersionWindow, Code: code, CustomerID: "c", OrderID: "o", OrderAmount: 1000,
			DiscountAmount: 500, ReservedAt: at, ExpiresAt: at.Add(time.Minute), Window: window}
	}
	got, err := c.Check(context.Background(), []ReservedEvent{
		ev("WIN", now, o),
		ev("WIN", now, o.Add(-7*24*time.Hour)),
		ev("WIN", now.Add(-time.Hour), time.Time{}),
		ev("WIN", now, time.Time{}),
		ev("PLAIN", now, o),
		ev("PLAIN", now, time.Time{}),
	})
	require.NoError(t, err)
	reasons := make([]string, len(got))
	for i, m := range got {
		reasons[i] = m.Reason
	}
	require.Equal(t, []string{"", MismatchOccurrence, MismatchOccurrence, MismatchOccurrence, MismatchOccurrence, ""}, reasons)
}

// An occurrence is checked against a settled definition only: a voucher
// changed within the staleness (its schedule may be new) lets the event
// through, and a change of its discount decided from the audit trail, which
// keeps no schedule, does not refuse a windowed event.
func TestEventCheckerOccurrenceOfAChangedVoucher(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC)
	sched := &Schedule{TimeZone: "UTC", Windows: []Window{{Days: []string{"MON"}, From: "09:00", To: "10:00"}}}
	v := Voucher{Code: "WIN", DiscountAmount: 600, TotalLimit: 10, PerUserLimit: 1, FlashSale: true,
		StartsAt: now.Add(-48 * time.Hour), EndsAt: now.Add(48 * time.Hour), UpdatedAt: now.Add(-time.Second),
		Schedule: sched, WindowLimit: 5}
	before := v
	before.DiscountAmount, before.Schedule, before.WindowLimit = 500, nil, 0 // as the audit trail has it
	c, err := NewEventChecker(EventCheckConfig{Store: checkStore{vouchers: map[string]Voucher{"WIN": v}},
		History: checkHistory{{At: now.Add(-time.Second), Before: before, HasBefore: true, After: before}},
		Clock:   func() time.Time { return now }})
	require.NoError(t, err)
	o := v.Occurrence(now).Start
	ev := ReservedEvent{Version: EventVersionWindow, Code: "WIN", CustomerID: "c", OrderID: "o", OrderAmount: 1000,
		DiscountAmount: 500, ReservedAt: now, ExpiresAt: now.Add(time.Minute), Window: o}
	other := ev
	other.OrderID, other.DiscountAmount, other.Window = "p", 600, o.Add(-7*24*time.Hour)
	got, err := c.Check(context.Background(), []ReservedEvent{ev, other})
	require.NoError(t, err)
	require.Equal(t, []EventMismatch{{}, {}}, got)
}
