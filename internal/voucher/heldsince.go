package voucher

import (
	"context"
	"time"
)

// A replacement (ReplacesOrderID) continues the hold it replaces: its hold
// keeps the first hold's start (HeldSince), and MaxHold from that start
// bounds its expiry, so that a chain of replacements cannot keep a use
// longer than one hold extended to the most. docs/rules.md ("Replacements
// keep the first hold's start").

// replacementUntil returns the expiry of a replacement made at now of a
// hold that began at since: the reservation TTL from now, but no later
// than MaxHold from since. A chain whose MaxHold has passed is refused
// with CodeReplacedOrderNotHeld: the replaced hold has expired, or will by
// the time the replacement is written.
func replacementUntil(cfg *ServiceConfig, req ReserveRequest, since, now time.Time) (time.Time, error) {
	bound := since.Add(cfg.MaxHold)
	if !bound.After(now) {
		return time.Time{}, Errorf(CodeReplacedOrderNotHeld,
			"order %s has been held since %s; a replacement cannot hold voucher %s past %s from then (the longest hold)",
			req.ReplacesOrderID, since.UTC().Format(time.RFC3339Nano), req.Code, cfg.MaxHold)
	}
	return minTime(now.Add(cfg.ReservationTTL), bound), nil
}

// storeReplacementTTL is the TTL of a replacement the store writes at now:
// the reservation TTL, bounded by the replaced order's hold start as the
// store has it. An order the store does not have as the customer's
// RESERVED hold is left to the store, which refuses it; so is one whose
// start is unknown (zero).
func storeReplacementTTL(ctx context.Context, store Store, cfg *ServiceConfig, req ReserveRequest, now time.Time) (time.Duration, error) {
	old, err := store.Order(ctx, req.ReplacesOrderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return cfg.ReservationTTL, nil
	case err != nil:
		return 0, err
	case old.CustomerID != req.CustomerID || old.Status != StatusReserved || old.HoldStart().IsZero():
		return cfg.ReservationTTL, nil
	}
	until, err := replacementUntil(cfg, req, old.HoldStart(), now)
	if err != nil {
		return 0, err
	}
	return until.Sub(now), nil
}

// gateReplacement bounds hold, a replacement's hold taken at hold.ReservedAt,
// by the replaced hold's start as the gate has it, and records that start
// in hold.HeldSince. refused is the answer to a chain past its MaxHold; err
// a gate failure. A replaced order the gate does not hold for the customer
// is left to the gate's Replace, which refuses it.
func gateReplacement(ctx context.Context, gate Gate, cfg *ServiceConfig, gateCode string, req ReserveRequest, hold *Hold) (refused, err error) {
	old, found, err := gate.Lookup(ctx, gateCode, hold.Replaces)
	if err != nil || !found || old.Released || old.CustomerID != hold.CustomerID || old.HoldStart().IsZero() {
		return nil, err
	}
	until, refused := replacementUntil(cfg, req, old.HoldStart(), hold.ReservedAt)
	if refused != nil {
		return refused, nil
	}
	hold.ExpiresAt, hold.HeldSince = until, old.HoldStart()
	return nil, nil
}
