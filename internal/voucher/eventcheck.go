package voucher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Reasons an EventChecker refuses an event; they label the consumer's
// metric of refused events and start the dead letter's reason.
const (
	MismatchUnknownVoucher = "unknown_voucher"
	MismatchNotFlash       = "not_flash"
	MismatchDiscount       = "discount_mismatch"
	MismatchWindow         = "outside_window"
	MismatchOrderAmount    = "order_amount_too_low"
	MismatchFuture         = "reserved_in_future"
	MismatchHoldTooLong    = "hold_too_long"
	MismatchOccurrence     = "occurrence_mismatch"
)

// EventMismatch is an EventChecker's verdict on one event: Reason is empty
// when the event agrees with what can be recomputed, else one of the
// Mismatch* labels, with Detail saying what differed.
type EventMismatch struct {
	Reason string
	Detail string
}

// String is the dead letter's reason: the label, then the detail.
func (m EventMismatch) String() string {
	if m.Detail == "" {
		return m.Reason
	}
	return m.Reason + ": " + m.Detail
}

// EventCheckConfig configures an EventChecker. Zero values mean defaults.
type EventCheckConfig struct {
	// Store reads the voucher definitions. Required.
	Store Store
	// History, when set, reads the definitions a voucher had (the audit
	// trail): an event reserved while its voucher changed is checked
	// against every definition a producer may have used then.
	History DefinitionHistory
	// ReservationTTL and MaxHold are the producers' (ServiceConfig's
	// fields, with the same defaults): no event may hold its use past
	// MaxHold from its reservation.
	ReservationTTL time.Duration
	MaxHold        time.Duration
	// Staleness is the longest a producer may have used a definition after
	// it changed: twice the producers' VoucherCacheTTL (an expired entry
	// serves while one caller re-reads it) plus their StaleVoucherMax
	// (default 2*DefaultVoucherCacheTTL + DefaultStaleVoucherMax). A
	// definition changed within Staleness before an event's reservedAt may
	// not be the one the event was computed with.
	Staleness time.Duration
	// CacheTTL is how long the checker reuses a definition it read
	// (default DefaultVoucherCacheTTL; negative reads for every batch).
	CacheTTL time.Duration
	// ClockSkew is how far an event's reservedAt may be ahead of this
	// process's clock (default DefaultEventClockSkew).
	ClockSkew time.Duration
	// Clock returns the current time (default time.Now).
	Clock func() time.Time
}

// DefaultEventClockSkew is the default of EventCheckConfig.ClockSkew.
const DefaultEventClockSkew = time.Minute

// DefinitionChange is one change of a voucher's definition: the
// definition before it (HasBefore false for a creation) and after it, and
// when it was made (the store's clock, at the start of its transaction).
type DefinitionChange struct {
	At        time.Time
	Before    Voucher
	HasBefore bool
	After     Voucher
}

// DefinitionHistory reads a voucher's definition changes (the audit trail).
type DefinitionHistory interface {
	// DefinitionChanges returns code's changes made after since, oldest
	// first.
	DefinitionChanges(ctx context.Context, code string, since time.Time) ([]DefinitionChange, error)
}

// EventChecker checks reservation events against what the consumer can
// recompute, before they are applied (Kafka mode): the voucher's
// definition (the discount of the event's order amount, the window, the
// minimum order amount, the flash kind), the hold bounds (reservedAt not in
// the future, expiresAt within MaxHold) and, where the definition changed
// too recently to decide, the definitions History has for the time of the
// reservation. Limits are the store's to check
// when it applies the event (its counters are the truth). It is safe for
// concurrent use.
type EventChecker struct {
	cfg EventCheckConfig

	mu    sync.Mutex
	cache map[string]checkedVoucher // guarded by mu
}

type checkedVoucher struct {
	v       Voucher
	found   bool
	fetched time.Time
}

// NewEventChecker returns a checker, or an error for an invalid config.
func NewEventChecker(cfg EventCheckConfig) (*EventChecker, error) {
	if cfg.Store == nil {
		return nil, errors.New("voucher: EventCheckConfig.Store is required")
	}
	if cfg.ReservationTTL <= 0 {
		cfg.ReservationTTL = DefaultReservationTTL
	}
	switch {
	case cfg.MaxHold == 0:
		cfg.MaxHold = max(DefaultMaxHold, cfg.ReservationTTL)
	case cfg.MaxHold < cfg.ReservationTTL:
		return nil, errors.New("voucher: MaxHold must not be shorter than ReservationTTL")
	}
	if cfg.Staleness <= 0 {
		cfg.Staleness = 2*DefaultVoucherCacheTTL + DefaultStaleVoucherMax
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultVoucherCacheTTL
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = DefaultEventClockSkew
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &EventChecker{cfg: cfg, cache: map[string]checkedVoucher{}}, nil
}

// Check returns one verdict per event, in order. An error (the store or
// the gate could not be read) decides nothing: the caller retries. A
// stack's event (Members) is checked member by member, each as the event
// of a single take; its verdict is its first member's mismatch, whose
// detail names the member's code.
func (c *EventChecker) Check(ctx context.Context, events []ReservedEvent) ([]EventMismatch, error) {
	stacks := false
	for _, e := range events {
		stacks = stacks || len(e.Members) > 0
	}
	if !stacks {
		return c.check(ctx, events)
	}
	var (
		flat  []ReservedEvent
		owner []int
	)
	for i, e := range events {
		if len(e.Members) == 0 {
			flat, owner = append(flat, e), append(owner, i)
			continue
		}
		for _, m := range e.Members {
			flat = append(flat, ReservedEvent{
				Version: EventVersion, Code: m.Code, CustomerID: m.CustomerID, OrderID: m.OrderID,
				OrderAmount: m.OrderAmount, DiscountAmount: m.DiscountAmount, ReservedAt: e.ReservedAt, ExpiresAt: e.ExpiresAt,
				Window: m.Window,
			})
			owner = append(owner, i)
		}
	}
	verdicts, err := c.check(ctx, flat)
	if err != nil {
		return nil, err
	}
	out := make([]EventMismatch, len(events))
	for j, v := range verdicts {
		i := owner[j]
		if v.Reason == "" || out[i].Reason != "" {
			continue
		}
		if len(events[i].Members) > 0 {
			v.Detail = "stack member " + flat[j].Code + ": " + v.Detail
		}
		out[i] = v
	}
	return out, nil
}

// check is Check of events without members.
func (c *EventChecker) check(ctx context.Context, events []ReservedEvent) ([]EventMismatch, error) {
	now := c.cfg.Clock()
	out := make([]EventMismatch, len(events))
	// The history of a voucher is read once per call, from the oldest
	// reservation of its events that the definition cannot decide.
	var histories map[string]*changes
	// A definition cached before this call is read again before it refuses
	// an event: it may be older than the one the event was computed with.
	var reread map[string]bool
	for i, e := range events {
		v, found, err := c.definition(ctx, e.Code, now, false)
		if err != nil {
			return nil, err
		}
		if m := definitionMismatch(v, e); found && (m.Reason != "" || occurrenceMismatch(v, e).Reason != "") && !reread[e.Code] {
			if reread == nil {
				reread = map[string]bool{}
			}
			reread[e.Code] = true
			if v, found, err = c.definition(ctx, e.Code, now, true); err != nil {
				return nil, err
			}
		}
		if !found {
			out[i] = EventMismatch{Reason: MismatchUnknownVoucher, Detail: "voucher " + e.Code + " does not exist"}
			continue
		}
		if out[i] = c.checkBounds(e, now); out[i].Reason != "" {
			continue
		}
		// The audit trail keeps no schedule: an occurrence is checked
		// against the current definition only, and only once it is settled
		// (a schedule changed more recently may be the one the event's
		// producer used).
		if m := occurrenceMismatch(v, e); m.Reason != "" && c.settled(v, e) {
			out[i] = m
			continue
		}
		if out[i] = definitionMismatch(v, e); out[i].Reason == "" || c.settled(v, e) {
			continue
		}
		if c.cfg.History == nil {
			continue
		}
		if histories == nil {
			histories = map[string]*changes{}
		}
		h := histories[e.Code]
		if h == nil {
			h = &changes{since: e.ReservedAt}
			histories[e.Code] = h
		}
		h.since = minTime(h.since, e.ReservedAt)
		h.events = append(h.events, i)
	}
	for code, h := range histories {
		list, err := c.cfg.History.DefinitionChanges(ctx, code, h.since.Add(-c.cfg.Staleness))
		if err != nil {
			return nil, err
		}
		for _, i := range h.events {
			if c.inForce(list, events[i]) {
				out[i] = EventMismatch{}
			}
		}
	}
	return out, nil
}

// changes gathers the events of one voucher that its history decides.
type changes struct {
	since  time.Time // the oldest of their reservedAt
	events []int     // their indexes
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// settled reports whether v, the current definition, is the one e was
// computed with: v was last changed more than Staleness before e's
// reservation, so every producer had read it by then.
func (c *EventChecker) settled(v Voucher, e ReservedEvent) bool {
	return !v.UpdatedAt.After(e.ReservedAt.Add(-c.cfg.Staleness))
}

// inForce reports whether e agrees with one of the definitions a producer
// may have used for it: the one before the first change of list made after
// e.ReservedAt-Staleness, and each one set by such a change made by
// e.ReservedAt (plus ClockSkew, the store's clock against the producer's).
// An empty list decides nothing (false): the current definition stands.
func (c *EventChecker) inForce(list []DefinitionChange, e ReservedEvent) bool {
	from := e.ReservedAt.Add(-c.cfg.Staleness)
	until := e.ReservedAt.Add(c.cfg.ClockSkew)
	first := true
	for _, ch := range list {
		if !ch.At.After(from) {
			continue
		}
		if first && ch.HasBefore && definitionMismatch(ch.Before, e).Reason == "" {
			return true
		}
		first = false
		if ch.At.After(until) {
			break
		}
		if definitionMismatch(ch.After, e).Reason == "" {
			return true
		}
	}
	return false
}

// checkBounds checks what needs no definition: the hold's times.
func (c *EventChecker) checkBounds(e ReservedEvent, now time.Time) EventMismatch {
	switch {
	case e.ReservedAt.After(now.Add(c.cfg.ClockSkew)):
		return EventMismatch{Reason: MismatchFuture, Detail: fmt.Sprintf("reservedAt %s is after now %s",
			e.ReservedAt.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))}
	case e.ExpiresAt.Sub(e.ReservedAt) > c.cfg.MaxHold:
		return EventMismatch{Reason: MismatchHoldTooLong, Detail: fmt.Sprintf("expiresAt is %s after reservedAt, more than the longest hold %s",
			e.ExpiresAt.Sub(e.ReservedAt), c.cfg.MaxHold)}
	case !e.HeldSince.IsZero() && e.ExpiresAt.Sub(e.HeldSince) > c.cfg.MaxHold:
		return EventMismatch{Reason: MismatchHoldTooLong, Detail: fmt.Sprintf("expiresAt is %s after heldSince, more than the longest hold %s",
			e.ExpiresAt.Sub(e.HeldSince), c.cfg.MaxHold)}
	}
	return EventMismatch{}
}

// definitionMismatch compares e with what v computes for it.
func definitionMismatch(v Voucher, e ReservedEvent) EventMismatch {
	switch want := v.Discount().Compute(e.OrderAmount); {
	case !v.FlashSale:
		return EventMismatch{Reason: MismatchNotFlash, Detail: "voucher " + v.Code + " is not a flash voucher"}
	case want != e.DiscountAmount && !clippedByBudget(v, e.DiscountAmount, want):
		return EventMismatch{Reason: MismatchDiscount, Detail: fmt.Sprintf("discountAmount %d, the voucher gives %d on orderAmount %d",
			e.DiscountAmount, want, e.OrderAmount)}
	case e.ReservedAt.Before(v.StartsAt.Truncate(time.Millisecond)) || !e.ReservedAt.Before(v.EndsAt):
		return EventMismatch{Reason: MismatchWindow, Detail: fmt.Sprintf("reservedAt %s is outside [%s, %s)",
			e.ReservedAt.UTC().Format(time.RFC3339Nano), v.StartsAt.UTC().Format(time.RFC3339Nano), v.EndsAt.UTC().Format(time.RFC3339Nano))}
	case e.OrderAmount < v.MinOrderAmount:
		return EventMismatch{Reason: MismatchOrderAmount, Detail: fmt.Sprintf("orderAmount %d is below %d", e.OrderAmount, v.MinOrderAmount)}
	}
	return EventMismatch{}
}

// occurrenceMismatch compares the occurrence e names with the one of v's
// windows covering its reservedAt: none outside every window (or without a
// schedule), that one's start inside.
func occurrenceMismatch(v Voucher, e ReservedEvent) EventMismatch {
	o := v.Occurrence(e.ReservedAt)
	if v.windowed() && o.Zero() || !o.Start.Equal(e.Window) {
		return EventMismatch{Reason: MismatchOccurrence, Detail: fmt.Sprintf("window %s, the voucher's windows give %s at reservedAt %s",
			formatInstant(e.Window), formatInstant(o.Start), e.ReservedAt.UTC().Format(time.RFC3339Nano))}
	}
	return EventMismatch{}
}

// formatInstant is t in RFC 3339, "none" for the zero time.
func formatInstant(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}

// definition returns code's voucher definition (without the live counts:
// one read of a few rows at any size), cached for CacheTTL unless fresh;
// found is false for a code that names nothing.
func (c *EventChecker) definition(ctx context.Context, code string, now time.Time, fresh bool) (Voucher, bool, error) {
	c.mu.Lock()
	cv, ok := c.cache[code]
	c.mu.Unlock()
	if ok && !fresh && now.Sub(cv.fetched) < c.cfg.CacheTTL {
		return cv.v, cv.found, nil
	}
	v, err := c.cfg.Store.VoucherDefinition(ctx, code)
	switch {
	case IsCode(err, CodeVoucherNotFound):
		cv = checkedVoucher{fetched: now}
	case err != nil:
		return Voucher{}, false, err
	default:
		cv = checkedVoucher{v: v, found: true, fetched: now}
	}
	c.mu.Lock()
	if len(c.cache) >= maxCachedVouchers {
		clear(c.cache)
	}
	c.cache[code] = cv
	c.mu.Unlock()
	return cv.v, cv.found, nil
}
