package voucher

import (
	"context"
	"errors"
	"time"
)

// ErrGateUnanswered marks a take (GateTakes.Reserve or Replace) that failed
// after it may have reached the gate: its call timed out or lost its
// connection, so its script may have run, or may still run later. The
// service remembers such attempts and settles them with GateHolds.Void.
var ErrGateUnanswered = errors.New("the gate did not answer; the take may have run")

// GateOrderState is what the gate records for an orderId (Gate.Known).
type GateOrderState int

const (
	// GateOrderUnknown: the gate does not know the orderId.
	GateOrderUnknown GateOrderState = iota
	// GateOrderHolding: the orderId holds a use (held, pending or
	// confirmed).
	GateOrderHolding
	// GateOrderReleased: the orderId is marked released.
	GateOrderReleased
)

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
	// GateBudgetExceeded: the hold's discount does not fit what is left of
	// the voucher's money budget (GateDecision.BudgetLeft).
	GateBudgetExceeded
	// GateWindowFull: the occurrence of the voucher's windows the hold is
	// taken in (Hold.Window) holds Hold.WindowLimit uses.
	GateWindowFull
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
	case GateBudgetExceeded:
		return "budget_exceeded"
	case GateWindowFull:
		return "window_full"
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
	// that a hold written to the store from the gate (kafkaWrites.applyUnwritten) is
	// written as the replacement it is.
	Replaces string
	// HeldSince is when the hold this one continues began: for a
	// replacement's hold, the first hold's start of its chain (so that
	// MaxHold bounds the chain); zero for a hold that replaces nothing,
	// which began at ReservedAt (HoldStart).
	HeldSince time.Time
	// Code is the campaign code a hold of a campaign's budget was taken
	// with; empty for a voucher's hold. The gate keeps the code held by
	// this order while the hold holds a use (held or pending), and an
	// orderId asked again with another code is a conflict.
	Code string
	// Budget is, for a take (Reserve, Replace), the voucher's money budget
	// as the caller's definition has it (Amount and Clip): the gate fits
	// DiscountAmount to what is left of it (Budget.Fit). Not kept with the
	// hold.
	Budget Budget
	// Window is the start of the occurrence of the voucher's windows the
	// hold was taken in (zero: none); the gate keeps it with the hold and
	// counts the hold against that occurrence until it gives the use back.
	Window time.Time
	// WindowLimit is, for a take, the voucher's quota per occurrence as the
	// caller's definition has it (0: none). Not kept with the hold.
	WindowLimit int32
}

// HoldStart is when h's hold began: HeldSince, else ReservedAt.
func (h Hold) HoldStart() time.Time {
	if h.HeldSince.IsZero() {
		return h.ReservedAt
	}
	return h.HeldSince
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
	// Discount is, for GateTaken, the discount the hold took when the
	// budget clipped it (0: the hold's own).
	Discount int64
	// BudgetLeft is, for GateBudgetExceeded, what is left of the budget.
	BudgetLeft int64
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
// the campaignCode argument of Validate). Its methods are grouped by what
// they are for; an adapter implements every group.
type Gate interface {
	GateTakes
	GateHolds
	GateLoading
	GateRepairs
	GateInstances
	// Ping checks that the gate answers.
	Ping(ctx context.Context) error
}

// GateTakes decides reservations: taking a use, or answering what a take
// would decide.
type GateTakes interface {
	// Reserve checks and takes a use atomically for hold.OrderID; a
	// campaign's hold (hold.Code set) also takes its code, GateCodeUsed
	// when another order holds it.
	Reserve(ctx context.Context, code string, perUserLimit int32, hold Hold) (GateDecision, error)
	// Validate answers what Reserve would decide for orderID (optional: ""
	// skips the orderId checks), customerID and campaignCode ("" for a
	// voucher), taking nothing: GateTaken for a use it would take, the
	// other outcomes as Reserve gives them; q is the voucher's money
	// budget with the order's discount (GateBudgetExceeded, or GateTaken
	// with Discount clipped) and its quota per occurrence in the
	// occurrence asked in (GateWindowFull).
	Validate(ctx context.Context, code string, perUserLimit int32, orderID, customerID, campaignCode string, q TakeLimits) (GateDecision, error)
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
	// ClaimOrder claims orderID for code until the given time, across all
	// vouchers, and returns the owning code (code itself when the claim is
	// ours; "" when a stack owns it, ClaimStack). Kafka mode needs it: a voucher's own keys cannot see that an
	// orderId was used with another code.
	ClaimOrder(ctx context.Context, orderID, code string, until time.Time) (owner string, err error)
	// UnclaimOrder drops code's claim on orderID, if it holds it.
	UnclaimOrder(ctx context.Context, orderID, code string) error
	// ClaimStack claims orderID for the stack rec until the given time, as
	// ClaimOrder claims it for a code (the same key: a code's claim and a
	// stack's exclude each other), and returns what owns it: rec when the
	// claim is (or already was) one of rec's exact value. Kafka mode claims
	// a stack's orderId and each member's before its first take.
	ClaimStack(ctx context.Context, orderID string, rec StackRecord, until time.Time) (OrderOwner, error)
	// UnclaimStack drops rec's claim on orderID, if it holds it.
	UnclaimStack(ctx context.Context, orderID string, rec StackRecord) error
	// OrderOwner reads what claims orderID (zero: nothing).
	OrderOwner(ctx context.Context, orderID string) (OrderOwner, error)
}

// StackRecord is the gate's record of a stack in Kafka mode, kept in the
// claim of its orderId and of each member's orderId: the routes of the
// stack and of its members find it there before the consumer has written
// the stack to the store.
type StackRecord struct {
	// OrderID is the stack's orderId.
	OrderID     string
	CustomerID  string
	OrderAmount int64
	// Codes are the stack's codes in the order given; the member of
	// position i+1 holds Codes[i] under StackMemberOrderID(OrderID, i+1).
	Codes []string
	// At is when the stack's holds were taken (their ReservedAt).
	At time.Time
	// Replaces is the order the stack replaces (ReplacesOrderID), "" for
	// none: a write of the stack from the gate releases it, as the
	// stack's event does.
	Replaces string
}

// Same reports whether r and o record the same request: orderId,
// customer, amount and codes (At may differ between attempts).
func (r StackRecord) Same(o StackRecord) bool {
	if r.OrderID != o.OrderID || r.CustomerID != o.CustomerID || r.OrderAmount != o.OrderAmount || len(r.Codes) != len(o.Codes) {
		return false
	}
	for i := range r.Codes {
		if r.Codes[i] != o.Codes[i] {
			return false
		}
	}
	return true
}

// OrderOwner is what claims an orderId in the gate: a single reservation's
// voucher (Code), or a stack (Stack); zero when nothing does.
type OrderOwner struct {
	Code  string
	Stack *StackRecord
}

// GateTakeOver is the gate's answer to TakeOver.
type GateTakeOver int

const (
	// GateHoldGone: no pending hold of the orderId for the writer or the
	// fencer (unknown, released, or another owner's).
	GateHoldGone GateTakeOver = iota
	// GateTakenOver: the pending hold is the fencer's.
	GateTakenOver
	// GateHoldDurable: the hold is held or confirmed: its writer committed
	// it after Kafka acknowledged its event.
	GateHoldDurable
)

// GateHolds follows one hold after its take: made durable, confirmed,
// extended, given back, or looked up.
type GateHolds interface {
	// Commit marks a pending hold durable (Kafka mode, after the ack) and
	// reports whether it did: false when the hold is not pending (already
	// durable, released, unknown). A replacement's hold frees the campaign
	// code its replaced order kept while it was pending (Replace).
	Commit(ctx context.Context, code string, hold Hold) (bool, error)
	// TakeOver makes a pending hold owned by hold.Owner (a writer whose
	// instance stopped answering) the fencer's, so that Commit refuses its
	// writer from then on; the hold keeps its use. GateTakenOver: it is
	// the fencer's (now or already); GateHoldDurable: it is durable, its
	// writer committed it (its event is in the log); GateHoldGone: the
	// gate does not hold it pending for either (unknown, released).
	TakeOver(ctx context.Context, code string, hold Hold, fencer string) (GateTakeOver, error)
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
	// Extend sets the expiry the gate records for orderID's hold (the one a
	// replay answers with), if it holds a use; it reports whether it
	// changed it. A released orderId is left as it is.
	Extend(ctx context.Context, code, orderID string, expiresAt time.Time) (bool, error)
	// Rediscount sets the discount recorded in orderID's hold, if it holds
	// a use, and moves the money budget's held amount by the difference,
	// in one step: the use is never free meanwhile. It reports whether it
	// changed the discount.
	Rediscount(ctx context.Context, code, orderID string, discount int64) (bool, error)
	// Release gives the use of orderID back if it holds one; safe to repeat.
	// It reports whether a use was given back.
	Release(ctx context.Context, code, orderID string, mode ReleaseMode) (bool, error)
	// Lookup returns what the gate knows of orderID; found is false when it
	// knows nothing (or the voucher is not loaded).
	Lookup(ctx context.Context, code, orderID string) (h Hold, found bool, err error)
	// Void settles the attempt hold names (hold.OrderID and its
	// ReservedAt) after its take got no answer (ErrGateUnanswered), in one
	// step: it returns the orderId's stored hold when the gate knows it
	// (found; that attempt's own or another's, told apart by ReservedAt),
	// and otherwise records the attempt as voided, so that its take, should
	// it still reach the gate, takes nothing. Another attempt of the
	// orderId is not affected.
	Void(ctx context.Context, code string, hold Hold) (stored Hold, found bool, err error)
	// FreedFrom returns the order that held campaignCode of the campaign
	// keyed under code until a replacement's Commit freed it, the last one
	// since the campaign was loaded; "" when none. That order's own event
	// may not be applied yet while the code's next holders are.
	FreedFrom(ctx context.Context, code, campaignCode string) (string, error)
}

// GateLoading puts vouchers into the gate and keeps their definition there
// in step with the store.
type GateLoading interface {
	// Load writes a snapshot if the voucher is not loaded yet; it reports
	// whether it wrote.
	Load(ctx context.Context, s Snapshot) (bool, error)
	// Loaded reports whether the voucher is in the gate.
	Loaded(ctx context.Context, code string) (bool, error)
	// Lock takes the per-voucher warm-up lock for ttl. ok is false when
	// another loader holds it.
	Lock(ctx context.Context, code string, ttl time.Duration) (unlock func(), ok bool, err error)
	// AdjustLimit adds delta (may be negative) to remaining if loaded, and
	// updates the per-customer limit and expiry; it clears local caches.
	AdjustLimit(ctx context.Context, v Voucher, delta int64) error
}

// GateRepairs reads a voucher's whole gate state and repairs it in the
// direction that cannot oversell (reconciliation). No call holds the gate
// for longer than a bounded chunk of work, whatever the voucher's size.
type GateRepairs interface {
	// Inspect reads a voucher's whole gate state (reconciliation and tests;
	// it reads every order, so never on the hot path). Remaining and
	// HeldCount are read together in one step; the users, orders and codes
	// are read in chunks, not as one snapshot: an entry present for the
	// whole read is in the state, one that changed meanwhile holds any
	// value it had during the read, one added or removed meanwhile may be
	// missing or present.
	Inspect(ctx context.Context, code string) (GateState, error)
	// Adopt records a hold the store has and the gate does not know (for
	// example after Redis lost writes): it takes a use for it, even below
	// zero remaining, only if the orderId is unknown to the gate. It reports
	// whether it changed anything. This is the safe direction: the gate
	// hands out less.
	Adopt(ctx context.Context, code string, hold Hold) (bool, error)
	// AdoptReleased records a confirmed hold the store has and the gate
	// marks released (Kafka mode: a replacement took over an order the
	// store had confirmed without the gate's mark, and the consumer kept
	// the order): it takes a use for it, even below zero remaining, only if
	// the orderId is still marked released. It reports whether it changed
	// anything. The gate hands out less.
	AdoptReleased(ctx context.Context, code string, hold Hold) (bool, error)
	// Clamp lowers remaining to totalLimit minus the holds the gate records
	// (its held count, in one step with remaining), if it is above; it
	// never raises it. It returns remaining before and after.
	Clamp(ctx context.Context, code string, totalLimit int32) (before, after int64, err error)
	// Counts reads a voucher's remaining uses, held count and version in
	// one step, without its orders (O(1)).
	Counts(ctx context.Context, code string) (GateCounts, error)
	// ScanOrders reads one chunk of a voucher's orders (HSCAN, about the
	// gate's scan count of them) from cursor (0: the first chunk) and
	// returns them with the cursor of the next chunk (0: none). An order
	// present for the whole walk is returned at least once (twice is
	// possible), in a state it had while its chunk was read; one added or
	// removed meanwhile may be returned or not. Nothing for a voucher not
	// loaded.
	ScanOrders(ctx context.Context, code string, cursor uint64) (holds []Hold, next uint64, err error)
	// Known reports, for each of orderIDs, what the gate records for it
	// now (one step, reading the orders alone: a voucher whose orders are
	// gone, as when it was never loaded or forgotten, knows none).
	Known(ctx context.Context, code string, orderIDs []string) ([]GateOrderState, error)
	// LimitCounts reads the gate's counters of the voucher's money budget
	// and of the occurrences of its windows (O(occurrences)).
	LimitCounts(ctx context.Context, code string) (GateLimitCounts, error)
	// RestoreWindows gives each occurrence of windows whose counter the
	// gate lost (absent) the count windows has for it, the uses the
	// store's held rows took in it; a counter present is left alone. It
	// returns how many it put back.
	RestoreWindows(ctx context.Context, code string, windows map[time.Time]int64) (int, error)
}

// GateCounts is what Counts reads of a voucher in one step.
type GateCounts struct {
	// Loaded is false when the voucher is not in the gate; the other
	// fields are then zero.
	Loaded bool
	// Remaining is the number of uses left.
	Remaining int64
	// HeldCount is the number of orders holding a use, when HeldCounted
	// (a voucher loaded before the gate kept the count has none until a
	// clamp counts it).
	HeldCount   int64
	HeldCounted bool
	// Version moves by one with every change of the voucher's orders, and
	// each such change moves HeldCount by one at most and Remaining the
	// other way by as much; only a limit change or a clamp moves Remaining
	// + HeldCount.
	Version int64
}

// GateLimitCounts is what LimitCounts reads of a voucher.
type GateLimitCounts struct {
	// BudgetAmount and BudgetHeld are the money budget's counter (cap and
	// the discounts of the orders holding a use); BudgetAmount is 0 for a
	// voucher without a budget.
	BudgetAmount, BudgetHeld int64
	// Windows are the counters of the occurrences of the voucher's windows
	// (start -> uses held); nil when none.
	Windows map[time.Time]int64
}

// GateInstances keeps the registry of live instances, so that the holds
// of one that died are given back without waiting for a grace period.
type GateInstances interface {
	// Beat records that instance is alive for ttl and registers it.
	Beat(ctx context.Context, instance string, ttl time.Duration) error
	// Alive reports, for each of instances, whether its beat is live.
	Alive(ctx context.Context, instances []string) (map[string]bool, error)
	// DeadInstances returns the registered instances whose beat expired.
	DeadInstances(ctx context.Context) ([]string, error)
	// ForgetInstance removes a dead instance from the registry.
	ForgetInstance(ctx context.Context, instance string) error
}

// GateState is a voucher's whole state in the gate, as Inspect reads it.
type GateState struct {
	// Loaded is false when the voucher is not in the gate; the other
	// fields are then empty.
	Loaded bool
	// Remaining is the number of uses left.
	Remaining int64
	// HeldCount is the number of orders holding a use as the gate counts
	// them, read in one step with Remaining, when HeldCounted; a gate
	// without an exact count (a voucher loaded before it kept one) leaves
	// HeldCounted false, and Held counts Orders.
	HeldCount   int64
	HeldCounted bool
	// Users maps each customer holding uses to their count.
	Users map[string]int32
	// Orders maps every known orderId to its hold: held, pending (Pending)
	// or released (Released).
	Orders map[string]Hold
	// Codes maps each campaign code held in the gate to the orderId
	// holding it (a flash campaign's budget only).
	Codes map[string]string
	// BudgetAmount and BudgetHeld are the gate's money budget counter (cap
	// and the discounts of the orders holding a use), read after the
	// orders; BudgetAmount is 0 for a voucher without a budget.
	BudgetAmount, BudgetHeld int64
	// Windows are the gate's counters of the occurrences of the voucher's
	// windows (start -> uses held), read after the orders; nil when none.
	Windows map[time.Time]int64
}

// BudgetHeldOrders is the sum of the discounts of the orders holding a use
// (held or pending), as the gate's budget counter should count them.
func (s GateState) BudgetHeldOrders() int64 {
	var n int64
	for _, h := range s.Orders {
		if !h.Released {
			n += h.DiscountAmount
		}
	}
	return n
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
