package voucher

import (
	"context"
	"errors"
	"time"
)

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
	// HeldSince is, for a replacement, when the first hold of its chain
	// began (Hold.HeldSince); zero otherwise. ExpiresAt is at most MaxHold
	// from it, which the consumer checks. The store takes the start from
	// the replaced order's row, so the field changes no version.
	HeldSince time.Time
	// Window is the start of the occurrence of the voucher's windows the
	// use was taken in (Hold.Window): the consumer records it on the
	// redemption, whose use counts against that occurrence. Such an event
	// is written as version EventVersionWindow.
	Window time.Time
	// Members is set on the one event of a stack (several codes on one
	// order): every member's use, in the order the codes were given; the
	// event's own fields are then the first member's (whose orderId is the
	// stack's) and StackCustomerID is the customerId the stack was asked
	// with. The consumer writes every member and the stack's rows in one
	// transaction, or nothing. Such an event is written as version
	// EventVersionStack.
	Members []StackEventMember
	// StackCustomerID is, on a stack's event, the customerId of the
	// request (each member's CustomerID is normalised by its voucher).
	StackCustomerID string
}

// EventVersionWindow is the version of a ReservedEvent taken in an
// occurrence of a voucher's windows (Window set), replacing or of a
// campaign or not. A consumer that knows only the earlier versions refuses
// it (dead letter) rather than write the use outside its occurrence's
// quota.
const EventVersionWindow = 4

// StackEventMember is one code's use in a stack's ReservedEvent. OrderID
// is the member's orderId (StackMemberOrderID); OrderAmount is what the
// earlier members left of the stack's amount.
type StackEventMember struct {
	Code           string
	CustomerID     string
	OrderID        string
	OrderAmount    int64
	DiscountAmount int64
	// Window is the member's occurrence of its voucher's windows (as
	// ReservedEvent.Window), zero when it has none.
	Window time.Time
}

// EventVersionStack is the version of a stack's ReservedEvent (Members
// set), whether its members carry windows or not. A consumer that knows
// only the earlier versions refuses it (dead letter) rather than write its
// first member alone, which would break all or none. A stack that
// replaces an order carries ReplacesOrderID (and HeldSince) in version 5
// too: a consumer whose version 5 does not know the field refuses such an
// event (dead letter) rather than write the stack beside the order it
// replaces; the consumer that knows it releases the replaced order (a
// stack's every member, or a single) in the stack's transaction.
const EventVersionStack = 5

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
		HeldSince: h.HeldSince, Window: h.Window,
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
