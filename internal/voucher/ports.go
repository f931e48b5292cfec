package voucher

import (
	"context"
	"errors"
	"time"
)

// Store is the source of truth (PostgreSQL). Every method is one transaction;
// adapters translate driver errors into *Error values (CodeUnavailable for a
// dependency failure, the contract codes for rule violations).
type Store interface {
	// CreateVoucher inserts a voucher; CodeVoucherExists when the code is taken.
	CreateVoucher(ctx context.Context, v Voucher) (Voucher, error)
	// Voucher returns a voucher with live Reserved and Confirmed counts.
	Voucher(ctx context.Context, code string) (Voucher, error)
	// PatchVoucher applies p atomically and returns the voucher before and
	// after the change (the gate adjusts remaining by the exact difference);
	// CodeLimitBelowHeld when a limit would drop below what is held.
	PatchVoucher(ctx context.Context, code string, p Patch) (before, after Voucher, err error)

	// Reserve takes one use in one transaction: the conditional counter
	// update, the per-customer counter and the redemption row. A known orderId
	// with the same code and customer is a replay; it takes nothing.
	Reserve(ctx context.Context, r ReserveRequest, now time.Time, ttl time.Duration) (Reservation, error)
	// Validate answers what Reserve of the same request at now would
	// answer, writing nothing: the same refusal errors, or what the use
	// would be. An empty OrderID skips the orderId checks.
	Validate(ctx context.Context, r ValidateRequest, now time.Time) (StoreValidation, error)
	// Redemption returns one redemption; CodeReservationNotFound when absent.
	Redemption(ctx context.Context, code, orderID string) (Redemption, error)
	// Order returns the redemption of an orderId whatever its voucher;
	// CodeReservationNotFound when the orderId is unknown.
	Order(ctx context.Context, orderID string) (Redemption, error)
	// AbandonOrder fences a gate hold of code whose write has not reached
	// the store (a Kafka event, or a flash-sync write of unknown outcome or
	// of a dead instance): a RELEASED row for h.OrderID, which takes no
	// use, unless the orderId has a row already (a write of it still in
	// progress is waited for). It returns the orderId's row and whether
	// this call inserted it; a write of the order arriving later changes
	// nothing. For a replacement's hold (h.Replaces), when it inserts the
	// row it also releases the replaced order if that is still the
	// customer's RESERVED hold, in the same transaction: the gate marked
	// it released when it let the replacement through.
	AbandonOrder(ctx context.Context, code string, h Hold, now time.Time) (Redemption, bool, error)
	// Confirm moves RESERVED to CONFIRMED; idempotent for CONFIRMED;
	// CodeReservationReleased when released or expired.
	Confirm(ctx context.Context, code, orderID string, now time.Time) (Redemption, error)
	// Release moves a held redemption to RELEASED and gives its use back to the
	// voucher and the customer; idempotent. released is true when this call
	// released it.
	Release(ctx context.Context, code, orderID string, now time.Time) (r Redemption, released bool, err error)
	// ExpireDue releases up to limit RESERVED redemptions whose expiry is at
	// or before now, returning those it released. Concurrent callers release
	// each row once.
	ExpireDue(ctx context.Context, now time.Time, limit int) ([]Redemption, error)
	// Extend moves the expiry of a RESERVED redemption to until, never
	// earlier than it is and never later than its creation plus maxHold,
	// under the row lock that the expiry sweep also takes. A RESERVED one
	// past its expiry is released right here, as Confirm does, and answered
	// CodeReservationReleased; a released one is CodeReservationReleased, a
	// confirmed one CodeReservationConfirmed.
	Extend(ctx context.Context, code, orderID string, until, now time.Time, maxHold time.Duration) (Redemption, error)
	// Holds reads what holds a voucher's uses, for the HELD_OUT answer of
	// the flash paths (the standard path decides it inside Reserve).
	Holds(ctx context.Context, code string) (HoldSummary, error)

	// ApplyReserved writes reservations decided by the gate (Kafka mode)
	// idempotently: a known orderId changes nothing. It returns one result per
	// event, in order.
	ApplyReserved(ctx context.Context, events []ReservedEvent) ([]ApplyResult, error)
	// GateSnapshot reads what the gate needs to load a voucher, in one
	// consistent snapshot.
	GateSnapshot(ctx context.Context, code string) (Snapshot, error)
	// FlashVouchers lists the codes of flash vouchers whose window has not
	// ended before since (reconciliation walks them).
	FlashVouchers(ctx context.Context, since time.Time) ([]string, error)

	// Ping checks that the store answers.
	Ping(ctx context.Context) error
}

// HoldSummary says what holds a voucher's uses, as the store sees them.
type HoldSummary struct {
	TotalLimit int32
	// UsedCount is the voucher row's count of held uses.
	UsedCount int32
	// EarliestExpiry is the expiry of the voucher's RESERVED redemption
	// that expires first; zero when none is RESERVED.
	EarliestExpiry time.Time
}

// Snapshot is a voucher's state as the gate loads it: remaining is
// TotalLimit minus held, never TotalLimit alone.
type Snapshot struct {
	Voucher Voucher
	// Held is the number of held redemptions (RESERVED + CONFIRMED).
	Held int32
	// Customers maps each customer with held uses to their count.
	Customers map[string]int32
	// Orders lists every known orderId of the voucher, held or released.
	Orders []Redemption
}

// Remaining is TotalLimit minus held.
func (s Snapshot) Remaining() int64 { return int64(s.Voucher.TotalLimit) - int64(s.Held) }

// GateConfirmation is what Gate.Confirm found.
type GateConfirmation int

// Gate confirmations.
const (
	// GateConfirmUnknown: the voucher is not loaded, or the orderId is
	// unknown to the gate or held with another campaign code.
	GateConfirmUnknown GateConfirmation = iota
	// GateConfirmMarked: the hold is marked confirmed (now or before).
	GateConfirmMarked
	// GateConfirmPending: the hold's reservation event is not acknowledged
	// yet; nothing changed.
	GateConfirmPending
	// GateConfirmReleased: the orderId is released (a replacement took its
	// use over, or a release reached the gate).
	GateConfirmReleased
)

// GateOutcome is what the gate decided for one reservation.
type GateOutcome int

// Gate outcomes.
const (
	// GateTaken: a use was taken for this orderId.
	GateTaken GateOutcome = iota + 1
	// GateReplay: the orderId already holds a use for the same customer.
	GateReplay
	// GateConflict: the orderId is known with another customer.
	GateConflict
	// GateReleased: the orderId was released; it cannot be used again.
	GateReleased
	// GateNotLoaded: the voucher is not in the gate; load it first.
	GateNotLoaded
	// GateQuotaHeld: the customer holds perUserLimit uses already.
	GateQuotaHeld
	// GateSoldOut: no use remains.
	GateSoldOut
	// GateNotHeld: the order a replacement names is not the customer's
	// held hold on the voucher (Replace).
	GateNotHeld
	// GateCodeUsed: the campaign code is held by another order.
	GateCodeUsed
)

// String names the outcome for logs and metrics.
func (o GateOutcome) String() string {
	switch o {
	case GateTaken:
		return "taken"
	case GateReplay:
		return "replay"
	case GateConflict:
		return "conflict"
	case GateReleased:
		return "released"
	case GateNotLoaded:
		return "not_loaded"
	case GateQuotaHeld:
		return "quota_held"
	case GateSoldOut:
		return "sold_out"
	case GateNotHeld:
		return "not_held"
	case GateCodeUsed:
		return "code_used"
	}
	return "unknown"
}

// Hold is what the gate records for an orderId that took a use, enough to
// answer a replay without the database.
type Hold struct {
	OrderID        string
	CustomerID     string
	OrderAmount    int64
	DiscountAmount int64
	ReservedAt     time.Time
	ExpiresAt      time.Time
	// Released is true for a released orderId's marker (Lookup only).
	Released bool
	// Confirmed is true for a hold whose order is confirmed, or being
	// confirmed in Kafka mode (Gate.Confirm): it holds its use, and no
	// replacement may take it over.
	Confirmed bool
	// Pending is true between taking a use and the durable write (Kafka
	// mode); a replay must not answer 201 from a pending hold.
	Pending bool
	// Owner is the id of the instance that took the use and writes it to
	// the store; empty for holds loaded or adopted from the store.
	Owner string
	// Replaces is, for a hold the service takes with Gate.Replace, the
	// orderId whose use it takes over; the gate keeps it with the hold, so
	// that a hold written to the store from the gate (applyFromGate) is
	// written as the replacement it is.
	Replaces string
	// Code is the campaign code a hold of a campaign's budget was taken
	// with; empty for a voucher's hold. The gate keeps the code held by
	// this order while the hold holds a use (held or pending), and an
	// orderId asked again with another code is a conflict.
	Code string
}

// CodeOr is the code a reservation of h names: h.Code for a campaign's
// hold, else gateCode, the voucher the gate keeps it under.
func (h Hold) CodeOr(gateCode string) string {
	if h.Code != "" {
		return h.Code
	}
	return gateCode
}

// GateDecision is the gate's answer. Hold is filled for GateReplay.
type GateDecision struct {
	Outcome GateOutcome
	Hold    Hold
	// Remaining is the number of uses left after the decision, when known.
	Remaining int64
	// Local reports a decision made in this process, from the gate's copy
	// of a sold-out voucher, without a call to Redis.
	Local bool
}

// ReleaseMode says what the gate keeps of a released orderId.
type ReleaseMode int

// Release modes.
const (
	// ReleaseMark gives the use back and marks the orderId released, so a
	// late retry cannot take a second use (release, expiry).
	ReleaseMark ReleaseMode = iota + 1
	// ReleaseForget gives the use back and forgets the orderId, so the client
	// may retry it (compensation after a failed durable write: nothing was
	// taken).
	ReleaseForget
)

// Gate is the atomic check-and-take of flash vouchers (Redis). Every
// method names a voucher by the code its keys are under: a voucher's own
// code, or for a flash campaign the campaign id (its budget's code), with
// the campaign code a reservation presents carried in Hold.Code (and in
// the campaignCode argument of Validate).
type Gate interface {
	// Reserve checks and takes a use atomically for hold.OrderID; a
	// campaign's hold (hold.Code set) also takes its code, GateCodeUsed
	// when another order holds it.
	Reserve(ctx context.Context, code string, perUserLimit int32, hold Hold) (GateDecision, error)
	// Validate answers what Reserve would decide for orderID (optional: ""
	// skips the orderId checks), customerID and campaignCode ("" for a
	// voucher), taking nothing: GateTaken for a use it would take, the
	// other outcomes as Reserve gives them.
	Validate(ctx context.Context, code string, perUserLimit int32, orderID, customerID, campaignCode string) (GateDecision, error)
	// Replace takes the use of replaces, customerID's held (not pending,
	// not released) hold, for hold.OrderID in one atomic step: replaces is
	// marked released and hold stored, the remaining count and the
	// customer's count unchanged. A known hold.OrderID is answered as
	// Reserve answers it; GateNotHeld when replaces is not such a hold. On
	// a campaign hold takes its code and replaces's code is freed, but a
	// pending hold (Kafka mode) leaves that code held by replaces until
	// Commit (or a ReleaseMark or Unreplace of hold.OrderID): the store
	// has replaces holding it until the consumer applies the replacement.
	Replace(ctx context.Context, code string, hold Hold, replaces string) (GateDecision, error)
	// Unreplace undoes a Replace whose durable write provably failed:
	// replaces holds its use again and orderID is forgotten. It reports
	// whether it changed anything.
	Unreplace(ctx context.Context, code, orderID, replaces string) (bool, error)
	// Confirm marks orderID's held hold confirmed before a Kafka-mode
	// confirmation is written to the store, so that no replacement takes
	// it over from then on; campaignCode is the code the confirmation
	// names ("" for a voucher). GateConfirmUnknown: the gate has nothing
	// to go by (voucher not loaded, orderId unknown or held with another
	// code) and the store decides.
	Confirm(ctx context.Context, code, orderID, campaignCode string) (GateConfirmation, error)
	// Lookup returns what the gate knows of orderID; found is false when it
	// knows nothing (or the voucher is not loaded).
	Lookup(ctx context.Context, code, orderID string) (h Hold, found bool, err error)
	// FreedFrom returns the order that held campaignCode of the campaign
	// keyed under code until a replacement's Commit freed it, the last one
	// since the campaign was loaded; "" when none. That order's own event
	// may not be applied yet while the code's next holders are.
	FreedFrom(ctx context.Context, code, campaignCode string) (string, error)
	// Commit marks a pending hold durable (Kafka mode, after the ack) and
	// reports whether it did: false when the hold is not pending (already
	// durable, released, unknown). A replacement's hold frees the campaign
	// code its replaced order kept while it was pending (Replace).
	Commit(ctx context.Context, code string, hold Hold) (bool, error)
	// Extend sets the expiry the gate records for orderID's hold (the one a
	// replay answers with), if it holds a use; it reports whether it
	// changed it. A released orderId is left as it is.
	Extend(ctx context.Context, code, orderID string, expiresAt time.Time) (bool, error)
	// Release gives the use of orderID back if it holds one; safe to repeat.
	// It reports whether a use was given back.
	Release(ctx context.Context, code, orderID string, mode ReleaseMode) (bool, error)
	// Load writes a snapshot if the voucher is not loaded yet; it reports
	// whether it wrote.
	Load(ctx context.Context, s Snapshot) (bool, error)
	// Loaded reports whether the voucher is in the gate.
	Loaded(ctx context.Context, code string) (bool, error)
	// AdjustLimit adds delta (may be negative) to remaining if loaded, and
	// updates the per-customer limit and expiry; it clears local caches.
	AdjustLimit(ctx context.Context, v Voucher, delta int64) error
	// Lock takes the per-voucher warm-up lock for ttl. ok is false when
	// another loader holds it.
	Lock(ctx context.Context, code string, ttl time.Duration) (unlock func(), ok bool, err error)
	// ClaimOrder claims orderID for code until the given time, across all
	// vouchers, and returns the owning code (code itself when the claim is
	// ours). Kafka mode needs it: a voucher's own keys cannot see that an
	// orderId was used with another code.
	ClaimOrder(ctx context.Context, orderID, code string, until time.Time) (owner string, err error)
	// UnclaimOrder drops code's claim on orderID, if it holds it.
	UnclaimOrder(ctx context.Context, orderID, code string) error
	// Inspect reads a voucher's whole gate state atomically (reconciliation
	// and tests; it reads every order, so never on the hot path).
	Inspect(ctx context.Context, code string) (GateState, error)
	// Adopt records a hold the store has and the gate does not know (for
	// example after Redis lost writes): it takes a use for it, even below
	// zero remaining, only if the orderId is unknown to the gate. It reports
	// whether it changed anything. This is the safe direction: the gate
	// hands out less.
	Adopt(ctx context.Context, code string, hold Hold) (bool, error)
	// Clamp lowers remaining to totalLimit minus the holds the gate records,
	// if it is above; it never raises it. It returns remaining before and
	// after.
	Clamp(ctx context.Context, code string, totalLimit int32) (before, after int64, err error)
	// Beat records that instance is alive for ttl and registers it.
	Beat(ctx context.Context, instance string, ttl time.Duration) error
	// Alive reports, for each of instances, whether its beat is live.
	Alive(ctx context.Context, instances []string) (map[string]bool, error)
	// DeadInstances returns the registered instances whose beat expired.
	DeadInstances(ctx context.Context) ([]string, error)
	// ForgetInstance removes a dead instance from the registry.
	ForgetInstance(ctx context.Context, instance string) error
	// Ping checks that the gate answers.
	Ping(ctx context.Context) error
}

// GateState is a voucher's whole state in the gate.
type GateState struct {
	// Loaded is false when the voucher is not in the gate; the other
	// fields are then empty.
	Loaded bool
	// Remaining is the number of uses left.
	Remaining int64
	// Users maps each customer holding uses to their count.
	Users map[string]int32
	// Orders maps every known orderId to its hold: held, pending (Pending)
	// or released (Released).
	Orders map[string]Hold
	// Codes maps each campaign code held in the gate to the orderId
	// holding it (a flash campaign's budget only).
	Codes map[string]string
}

// Held is the number of orders holding a use (held or pending).
func (s GateState) Held() int64 {
	var n int64
	for _, h := range s.Orders {
		if !h.Released {
			n++
		}
	}
	return n
}

// EventVersion is the version of ReservedEvent written by this build.
const EventVersion = 1

// ReservedEvent records a use taken by the gate in Kafka mode; the consumer
// writes it to the store.
type ReservedEvent struct {
	Version        int
	Code           string
	CustomerID     string
	OrderID        string
	OrderAmount    int64
	DiscountAmount int64
	ReservedAt     time.Time
	ExpiresAt      time.Time
	// ReplacesOrderID is set when the use was taken over from that order
	// (Gate.Replace): the consumer releases it and writes this one in one
	// transaction. Such an event is written as version
	// EventVersionReplace; others as EventVersion, which older consumers
	// read.
	ReplacesOrderID string
	// CampaignCode is, for a use of a flash campaign (Code is then the
	// campaign id, its budget's code), the campaign code the reservation
	// presented: the consumer records it on the redemption. Such an event
	// is written as version EventVersionCampaign.
	CampaignCode string
}

// EventVersionCampaign is the version of a ReservedEvent of a campaign code
// (CampaignCode set), replacing or not. A consumer that knows only
// EventVersion or EventVersionReplace refuses it (dead letter) rather than
// write the use without its code, which would let the code be used twice.
const EventVersionCampaign = 3

// EventVersionReplace is the version of a ReservedEvent that replaces an
// order. A consumer that knows only EventVersion refuses it (dead letter)
// rather than apply it as a plain reservation, which would count the use
// twice.
const EventVersionReplace = 2

// EventFromHold builds the event for a hold taken by the gate.
func EventFromHold(code string, h Hold) ReservedEvent {
	return ReservedEvent{
		Version: EventVersion, Code: code, CustomerID: h.CustomerID, OrderID: h.OrderID,
		OrderAmount: h.OrderAmount, DiscountAmount: h.DiscountAmount,
		ReservedAt: h.ReservedAt, ExpiresAt: h.ExpiresAt, ReplacesOrderID: h.Replaces, CampaignCode: h.Code,
	}
}

// Redemption is the redemption the event describes, RESERVED; a campaign's
// answers with its campaign code, as the store does.
func (e ReservedEvent) Redemption() Redemption {
	code := e.Code
	if e.CampaignCode != "" {
		code = e.CampaignCode
	}
	return Redemption{
		OrderID: e.OrderID, VoucherCode: code, CustomerID: e.CustomerID,
		OrderAmount: e.OrderAmount, DiscountAmount: e.DiscountAmount,
		Status: StatusReserved, CreatedAt: e.ReservedAt, UpdatedAt: e.ReservedAt, ExpiresAt: e.ExpiresAt,
	}
}

// ApplyOutcome is what applying one ReservedEvent did.
type ApplyOutcome int

// Apply outcomes.
const (
	// Applied: the redemption was inserted and counted.
	Applied ApplyOutcome = iota + 1
	// AlreadyApplied: the orderId was known; nothing changed.
	AlreadyApplied
	// Rejected: the database refused it (unknown voucher, limit); the event
	// belongs in the dead-letter topic.
	Rejected
)

// ApplyResult is the result for one event of Store.ApplyReserved.
type ApplyResult struct {
	Outcome ApplyOutcome
	// Reason says why an event was rejected.
	Reason string
}

// ErrOutcomeUnknown marks a publish that gave up waiting while the event may
// still be written: the reservation is neither taken nor refused for sure.
var ErrOutcomeUnknown = errors.New("no answer in time; the event may still be written")

// EventLog carries reservations to the store in Kafka mode.
type EventLog interface {
	// PublishReserved writes the event durably (acks=all) or fails; an
	// error wrapping ErrOutcomeUnknown means it may still be written.
	PublishReserved(ctx context.Context, e ReservedEvent) error
	// CaughtUp returns nil when every event published before the call has
	// been applied to the store, or an error saying how far behind it is.
	CaughtUp(ctx context.Context) error
}
