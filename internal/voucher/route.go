package voucher

import (
	"context"
	"log/slog"
	"time"
)

// deps are the ports and settings every part of the service shares; set
// once by NewService and never changed.
type deps struct {
	cfg    ServiceConfig
	store  Store
	gate   Gate
	events EventLog
	obs    Observer
	log    *slog.Logger
	// unanswered holds the takes and give-backs the gate did not answer,
	// until SettleUnknown settles them.
	unanswered *unansweredTakes
}

// now reads the service's clock.
func (d *deps) now() time.Time { return d.cfg.Clock() }

// writeContext detaches a durable write from the client's cancellation and
// bounds it, so that its outcome is known when we answer.
func (d *deps) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d.cfg.WriteTimeout)
}

// route is where one request about a code goes, resolved once when the
// request arrives and carried through every step after: what the code
// names, where the gate keeps its holds, and the write path of its kind.
type route struct {
	// code is the code the request names.
	code string
	// v is what code resolved to: the voucher, or the budget of the
	// campaign code belongs to (v.Code is then the campaign id); zero when
	// code could not be resolved (the store alone then answers).
	v Voucher
	// campaignCode is code when it is one of a campaign's codes, else "".
	campaignCode string
	// pre is the store's read that resolved code together with the
	// request's orderId, when one was made (reservations and validations
	// of a code not in the definition cache).
	pre *Resolution
	// path is the write path of v's kind, chosen when the service was
	// built.
	path writePath
}

// gateCode is the code the gate keeps the route's holds under: the
// voucher's code, or a campaign's id.
func (rt route) gateCode() string { return rt.v.Code }

// writePath is how the reservations of one kind of voucher are taken and
// followed: standardPath for standard vouchers, flashPath for flash ones in
// the write mode the service was built with, gatelessPath for flash ones
// when no gate is configured. Every method gets the request's route.
type writePath interface {
	// reserve takes a use for req (its customerId in the voucher's form)
	// at now, or answers why not; mode is the path that answered.
	reserve(ctx context.Context, rt route, req ReserveRequest, now time.Time) (res Reservation, mode Mode, err error)
	// validate answers what reserve would answer at now, taking nothing.
	validate(ctx context.Context, rt route, req ValidateRequest, now time.Time) (StoreValidation, error)
	// redemption returns orderID's redemption.
	redemption(ctx context.Context, rt route, orderID string) (Redemption, error)
	// confirm marks orderID's reservation CONFIRMED; idempotent.
	confirm(ctx context.Context, rt route, orderID string) (Redemption, error)
	// release gives orderID's use back; idempotent.
	release(ctx context.Context, rt route, orderID string) (Redemption, error)
	// extend moves orderID's expiry to until (Store.Extend's rules).
	extend(ctx context.Context, rt route, orderID string, until, now time.Time) (Redemption, error)
	// released gives orderID's use back wherever the path keeps it besides
	// the store, after the store released it (the expiry job).
	released(ctx context.Context, rt route, orderID string)
}

// routeNew resolves the code of a reservation or a validation, reading
// orderID's row with it when the store is asked (catalog.definition).
func (s *Service) routeNew(ctx context.Context, code, orderID string, now time.Time) (route, error) {
	v, pre, err := s.catalog.definition(ctx, code, orderID, now)
	if err != nil {
		return route{}, err
	}
	return route{code: code, v: v, campaignCode: campaignCodeOf(code, v), pre: pre, path: s.pathOf(v)}, nil
}

// routeKnown resolves the code of a call on an existing reservation
// (catalog.known). A code that cannot be resolved, or any code when no gate
// is configured, is routed to the store alone, which answers it.
func (s *Service) routeKnown(ctx context.Context, code string) route {
	if s.gate == nil {
		return route{code: code, path: s.standard}
	}
	v, err := s.catalog.known(ctx, code, s.now())
	if err != nil {
		return route{code: code, path: s.standard}
	}
	return route{code: code, v: v, campaignCode: campaignCodeOf(code, v), path: s.pathOf(v)}
}

// pathOf is the write path of v's kind.
func (s *Service) pathOf(v Voucher) writePath {
	if v.FlashSale {
		return s.flash
	}
	return s.standard
}

// campaignCodeOf is the campaign code a request for code presents when v is
// what code resolved to: code itself when v is a campaign's budget reached
// through one of its codes, "" for a voucher.
func campaignCodeOf(code string, v Voucher) string {
	if v.Code != code {
		return code
	}
	return ""
}
