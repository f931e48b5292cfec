package voucher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// ReasonOutsideWindow refuses a reservation of a voucher with a Schedule at
// an instant no occurrence of its windows covers (NOT_ELIGIBLE).
const ReasonOutsideWindow Reason = "OUTSIDE_WINDOW"

// LimitWindow: the occurrence the reservation falls in holds WindowLimit
// uses (OUT_OF_STOCK, HELD_OUT).
const LimitWindow Limit = "window"

// MaxWindows is the most windows a Schedule may have.
const MaxWindows = 32

// Schedule is a voucher's recurring windows: a reservation is eligible only
// during an occurrence of one of them (and inside StartsAt/EndsAt). Times
// are wall-clock readings in TimeZone, an IANA zone name.
//
// The rule for daylight-saving changes (docs/rules.md, "Recurring windows"):
// an occurrence of a window on local day D runs from the first instant at
// which the local clock reads From or later on D to the first instant at
// which it reads To or later; an occurrence of no length is skipped. So on
// the spring-forward day of Europe/Berlin a 02:00-03:00 window has no
// occurrence (the clock never reads 02:xx), and on the fall-back day it
// lasts two hours (02:00 CEST to 03:00 CET: the clock reads 02:xx twice). A
// window never crosses midnight: write 22:00-24:00 and 00:00-02:00 of the
// next day, two occurrences with a quota each.
type Schedule struct {
	TimeZone string   `json:"timeZone"`
	Windows  []Window `json:"windows"`
}

// Window is one recurring window: on each of Days, from From to To (local
// "HH:MM", From before To; To may be "24:00", the end of the day).
type Window struct {
	Days []string `json:"days"`
	From string   `json:"from"`
	To   string   `json:"to"`
}

// Occurrence is one occurrence of a window: [Start, End).
type Occurrence struct {
	Start, End time.Time
}

// Zero reports whether o is no occurrence.
func (o Occurrence) Zero() bool { return o.Start.IsZero() }

var weekdays = map[string]time.Weekday{
	"MON": time.Monday, "TUE": time.Tuesday, "WED": time.Wednesday, "THU": time.Thursday,
	"FRI": time.Friday, "SAT": time.Saturday, "SUN": time.Sunday,
}

// zones caches time.LoadLocation, which reads the zone database each call.
var zones sync.Map // name -> *time.Location

func loadZone(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("no zone")
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, l)
	return l, nil
}

// clockMinutes parses "HH:MM" (00:00-24:00) into minutes of the day.
func clockMinutes(s string) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	for _, i := range []int{0, 1, 3, 4} {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	h, m := int(s[0]-'0')*10+int(s[1]-'0'), int(s[3]-'0')*10+int(s[4]-'0')
	if m > 59 || h > 24 || h == 24 && m != 0 {
		return 0, false
	}
	return h*60 + m, true
}

// Validate checks the schedule: a zone of the IANA database, 1 to
// MaxWindows windows, each with distinct days and From before To, and no
// two windows overlapping on a day they share (an instant belongs to at
// most one occurrence).
func (s Schedule) Validate() error {
	if _, err := loadZone(s.TimeZone); err != nil {
		return Errorf(CodeInvalidRequest, "schedule.timeZone must be a zone of the IANA database, such as Europe/Berlin")
	}
	if len(s.Windows) == 0 || len(s.Windows) > MaxWindows {
		return Errorf(CodeInvalidRequest, "schedule.windows must hold 1 to %d windows", MaxWindows)
	}
	type span struct{ from, to int }
	byDay := map[time.Weekday][]span{}
	for i, w := range s.Windows {
		if len(w.Days) == 0 || len(w.Days) > 7 {
			return Errorf(CodeInvalidRequest, "schedule.windows[%d].days must name 1 to 7 days", i)
		}
		from, okFrom := clockMinutes(w.From)
		to, okTo := clockMinutes(w.To)
		switch {
		case !okFrom || from >= 24*60:
			return Errorf(CodeInvalidRequest, "schedule.windows[%d].from must be a time HH:MM from 00:00 to 23:59", i)
		case !okTo:
			return Errorf(CodeInvalidRequest, "schedule.windows[%d].to must be a time HH:MM from 00:01 to 24:00", i)
		case from >= to:
			return Errorf(CodeInvalidRequest,
				"schedule.windows[%d]: from must be before to (a window crossing midnight is two windows: until 24:00, and from 00:00 the next day)", i)
		}
		seen := map[time.Weekday]bool{}
		for _, d := range w.Days {
			wd, ok := weekdays[d]
			if !ok {
				return Errorf(CodeInvalidRequest, "schedule.windows[%d].days: %q is not one of MON TUE WED THU FRI SAT SUN", i, d)
			}
			if seen[wd] {
				return Errorf(CodeInvalidRequest, "schedule.windows[%d].days names %s twice", i, d)
			}
			seen[wd] = true
			for _, o := range byDay[wd] {
				if from < o.to && o.from < to {
					return Errorf(CodeInvalidRequest, "schedule.windows[%d] overlaps another window on %s", i, d)
				}
			}
			byDay[wd] = append(byDay[wd], span{from, to})
		}
	}
	return nil
}

// String is the schedule in the form it is written in, for logs.
func (s Schedule) String() string {
	parts := make([]string, 0, len(s.Windows))
	for _, w := range s.Windows {
		parts = append(parts, strings.Join(w.Days, ",")+" "+w.From+"-"+w.To)
	}
	return s.TimeZone + " " + strings.Join(parts, "; ")
}

// At returns the occurrence covering now, or the zero Occurrence when none
// does. The schedule must be valid.
func (s Schedule) At(now time.Time) Occurrence {
	loc, err := loadZone(s.TimeZone)
	if err != nil {
		return Occurrence{}
	}
	y, m, d := now.In(loc).Date()
	// The day before as well: a zone's clock may step back over midnight.
	for back := 1; back >= 0; back-- {
		for _, o := range s.occurrencesOn(loc, y, m, d-back) {
			if !now.Before(o.Start) && now.Before(o.End) {
				return o
			}
		}
	}
	return Occurrence{}
}

// Next returns the start of the first occurrence that starts after now, or
// the zero time when none does within the next fifteen days (a valid
// schedule has one every week, unless a daylight-saving change skips that
// week's only window: then the week after).
func (s Schedule) Next(now time.Time) time.Time {
	loc, err := loadZone(s.TimeZone)
	if err != nil {
		return time.Time{}
	}
	y, m, d := now.In(loc).Date()
	for i := 0; i <= 15; i++ {
		var best time.Time
		for _, o := range s.occurrencesOn(loc, y, m, d+i) {
			if o.Start.After(now) && (best.IsZero() || o.Start.Before(best)) {
				best = o.Start
			}
		}
		if !best.IsZero() {
			return best
		}
	}
	return time.Time{}
}

// occurrencesOn returns the non-empty occurrences of the windows on local
// day y-m-d (normalised like time.Date).
func (s Schedule) occurrencesOn(loc *time.Location, y int, m time.Month, d int) []Occurrence {
	day := time.Date(y, m, d, 12, 0, 0, 0, time.UTC)
	var out []Occurrence
	for _, w := range s.Windows {
		if !slices.ContainsFunc(w.Days, func(n string) bool { return weekdays[n] == day.Weekday() }) {
			continue
		}
		from, _ := clockMinutes(w.From)
		to, _ := clockMinutes(w.To)
		o := Occurrence{Start: firstAtOrAfter(loc, day, from), End: firstAtOrAfter(loc, day, to)}
		if o.Start.Before(o.End) {
			out = append(out, o)
		}
	}
	return out
}

// firstAtOrAfter returns the first instant at which the clock of loc reads
// minute minutes of local day day (24*60: midnight ending it) or later: the
// earlier instant of a reading that happens twice, the end of the gap for
// a reading that never happens.
func firstAtOrAfter(loc *time.Location, day time.Time, minute int) time.Time {
	y, m, d := day.Date()
	wall := time.Date(y, m, d, 0, minute, 0, 0, time.UTC)
	t := time.Date(y, m, d, 0, minute, 0, 0, loc)
	reads := func(c time.Time) bool {
		l := c.In(loc)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC).Equal(wall)
	}
	start, end := t.ZoneBounds()
	candidates := []time.Time{t}
	if !start.IsZero() {
		_, off := start.Add(-time.Nanosecond).Zone()
		candidates = append(candidates, wall.Add(-time.Duration(off)*time.Second))
	}
	if !end.IsZero() {
		_, off := end.Zone()
		candidates = append(candidates, wall.Add(-time.Duration(off)*time.Second))
	}
	var best time.Time
	for _, c := range candidates {
		if reads(c) && (best.IsZero() || c.Before(best)) {
			best = c
		}
	}
	if !best.IsZero() {
		return best
	}
	// The reading falls in a gap: the clock jumps over it at a zone bound.
	if wallAfter(t.In(loc), wall) {
		return start
	}
	return end
}

// wallAfter reports whether t's local reading is later than wall (a
// reading written as UTC).
func wallAfter(t time.Time, wall time.Time) bool {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC).After(wall)
}

// windowed reports whether v has a schedule.
func (v Voucher) windowed() bool { return v.Schedule != nil }

// Occurrence is the occurrence of v's schedule covering now (zero without a
// schedule or outside every window).
func (v Voucher) Occurrence(now time.Time) Occurrence {
	if !v.windowed() {
		return Occurrence{}
	}
	return v.Schedule.At(now)
}

// NextWindowAt is the start of v's next occurrence after now, or zero
// without a schedule or when it would start at or after EndsAt.
func (v Voucher) NextWindowAt(now time.Time) time.Time {
	if !v.windowed() {
		return time.Time{}
	}
	from := now
	if from.Before(v.StartsAt) {
		from = v.StartsAt.Add(-time.Nanosecond)
	}
	next := v.Schedule.Next(from)
	if next.IsZero() || !next.Before(v.EndsAt) {
		return time.Time{}
	}
	return next
}

// WindowCount is the counter of one occurrence: its start and the uses its
// held redemptions hold.
type WindowCount struct {
	Start time.Time
	Held  int32
}

// CurrentWindow is the occurrence of v's schedule covering now with the
// uses it holds (from v.LatestWindow, the latest counter the store has) and
// whether there is one.
func (v Voucher) CurrentWindow(now time.Time) (o Occurrence, used int32, ok bool) {
	o = v.Occurrence(now)
	if o.Zero() {
		return o, 0, false
	}
	if v.LatestWindow.Start.Equal(o.Start) {
		used = v.LatestWindow.Held
	}
	return o, used, true
}

// CodeWindowNotSet refuses a PATCH of windowLimit on a voucher created
// without one: a counter added later could miss a reservation in flight.
const CodeWindowNotSet ErrorCode = "WINDOW_NOT_SET"

// validateWindows checks Schedule and WindowLimit.
func (v Voucher) validateWindows() error {
	switch {
	case v.WindowLimit < 0:
		return Errorf(CodeInvalidRequest, "windowLimit must be > 0")
	case v.WindowLimit > 0 && v.Schedule == nil:
		return Errorf(CodeInvalidRequest, "windowLimit needs a schedule")
	case v.Schedule != nil:
		return v.Schedule.Validate()
	}
	return nil
}

// withNextWindow fills the NextWindowAt of a refusal of v at now by its
// windows (OUTSIDE_WINDOW, a full occurrence), which the store and the
// gate, knowing no schedule, leave zero.
func withNextWindow(err error, v Voucher, now time.Time) error {
	e, ok := err.(*Error)
	if !ok || !v.windowed() || !e.NextWindowAt.IsZero() || e.Limit != LimitWindow && e.Reason != ReasonOutsideWindow {
		return err
	}
	c := *e
	c.NextWindowAt = v.NextWindowAt(now)
	return &c
}

// windowFull is the flash paths' answer to a take refused by the quota of
// its occurrence: HELD_OUT while the store knows a RESERVED hold of the
// voucher (the holds read for HELD_OUT, cached the same way; a hold of
// another occurrence may be among them, so Retry-After is a lower bound of
// when this occurrence may free a use), or while the store cannot be read;
// OUT_OF_STOCK otherwise. Both name the window and the next occurrence.
func (p *flashPath) windowFull(ctx context.Context, rt route, now time.Time) error {
	f := Facts{Voucher: rt.code, Window: true, NextWindowAt: rt.v.NextWindowAt(now)}
	_, sum, err := p.holds(ctx, rt.gateCode(), now)
	switch {
	case err != nil:
		f.RetryAfter = p.cfg.ReservationTTL
	case !sum.EarliestExpiry.IsZero():
		f.RetryAfter = max(sum.EarliestExpiry.Sub(now), time.Second)
	default:
		return Reject(CodeOutOfStock, "", f)
	}
	return Reject(CodeHeldOut, "", f)
}

// TakeLimits is what a gate validation checks besides the uses: the
// voucher's money budget (Amount 0: none) against the discount the order
// would get, and its quota per occurrence (0: none) in the occurrence
// asked in.
type TakeLimits struct {
	Budget      Budget
	Discount    int64
	WindowLimit int32
	Window      time.Time
}
