package voucher

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// Events out (docs/events.md): every committed change an event reports is
// written by the store, in the transaction of the change, to its outbox.
// The feed, the webhooks and the events topic carry the same events with the
// same ids. This file holds their domain types and the ports of the store
// and of the administration.

// EventType names an event of the outbox.
type EventType string

// Event types.
const (
	// EventReserved: a use was taken (opt-in: written only while a webhook
	// subscribes to it or the feed asks for it; it is the hot path).
	EventReserved EventType = "reservation.reserved"
	// EventConfirmed: a reservation became CONFIRMED.
	EventConfirmed EventType = "reservation.confirmed"
	// EventReleased: a use was given back; data.reason is released,
	// expired, replaced or refunded.
	EventReleased EventType = "reservation.released"
	// EventSoldOut: a take left no free use.
	EventSoldOut EventType = "voucher.sold_out"
	// EventLowStock: a take left fewer free uses than the low-stock
	// threshold.
	EventLowStock EventType = "voucher.low_stock"
	// EventDisabled and EventEnabled: the voucher was stopped or started
	// again.
	EventDisabled EventType = "voucher.disabled"
	EventEnabled  EventType = "voucher.enabled"
)

// EventTypes lists every event type.
var EventTypes = []EventType{EventReserved, EventConfirmed, EventReleased, EventSoldOut, EventLowStock, EventDisabled, EventEnabled}

// ValidEventType reports whether t is an event type.
func ValidEventType(t EventType) bool {
	for _, x := range EventTypes {
		if x == t {
			return true
		}
	}
	return false
}

// Event is one committed change. ID is unique and increasing in the order
// the events of one voucher happened.
type Event struct {
	ID   int64
	Type EventType
	// VoucherCode is the voucher (or campaign budget) the change was made
	// to: the events topic's key and the unit of ordering of deliveries.
	VoucherCode string
	CreatedAt   time.Time
	// Data is the type's JSON object.
	Data json.RawMessage
}

// eventJSON is an event on the wire.
type eventJSON struct {
	ID        int64           `json:"id"`
	Type      EventType       `json:"type"`
	CreatedAt time.Time       `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
}

// JSON returns the event as sent and listed:
// {"id","type","createdAt","data"}.
func (e Event) JSON() []byte {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	b, _ := json.Marshal(eventJSON{ID: e.ID, Type: e.Type, CreatedAt: e.CreatedAt.UTC(), Data: data})
	return b
}

// IDString is the id as the Voucherd-Event-Id header carries it.
func (e Event) IDString() string { return strconv.FormatInt(e.ID, 10) }

// Webhook is a subscription: the events of Events are POSTed to URL, signed
// with Secret.
type Webhook struct {
	ID          string
	URL         string
	Events      []EventType
	Description string
	Active      bool
	// Secret signs deliveries; answered once, by the creation.
	Secret    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Wants reports whether the webhook subscribes to t.
func (w Webhook) Wants(t EventType) bool {
	for _, x := range w.Events {
		if x == t {
			return true
		}
	}
	return false
}

// WebhookPatch changes the fields it sets.
type WebhookPatch struct {
	URL         *string
	Events      *[]EventType
	Description *string
	Active      *bool
}

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

// Delivery statuses.
const (
	// DeliveryPending: not delivered yet (due, in flight or waiting for its
	// next attempt).
	DeliveryPending DeliveryStatus = "pending"
	// DeliveryDelivered: the receiver answered 2xx.
	DeliveryDelivered DeliveryStatus = "delivered"
	// DeliveryFailed: attempts gave up (the retry period ended).
	DeliveryFailed DeliveryStatus = "failed"
)

// Delivery is one event to one webhook.
type Delivery struct {
	WebhookID     string
	EventID       int64
	EventType     EventType
	VoucherCode   string
	Status        DeliveryStatus
	Attempts      int
	CreatedAt     time.Time
	NextAttemptAt time.Time
	LastAttemptAt *time.Time
	// LastStatus is the receiver's HTTP status of the last attempt (0: no
	// answer); LastError says what went wrong.
	LastStatus  int
	LastError   string
	DeliveredAt *time.Time
}

// EventFilter selects one page of the feed. Zero fields select everything.
type EventFilter struct {
	Type  EventType
	Code  string
	Limit int
	After string
}

// EventPage is one page of the feed, oldest first; Next continues it (also
// on the last page: the events written later follow it).
type EventPage struct {
	Events []Event
	Next   string
}

// WebhookPage is one page of webhooks; an empty Next means the last page.
type WebhookPage struct {
	Webhooks []Webhook
	Next     string
}

// DeliveryFilter selects one page of a webhook's deliveries, oldest event
// first.
type DeliveryFilter struct {
	WebhookID string
	Status    DeliveryStatus
	Limit     int
	After     string
}

// DeliveryPage is one page of deliveries; an empty Next means the last
// page.
type DeliveryPage struct {
	Deliveries []Delivery
	Next       string
}

// EventAdmin is the administration of the feed and the webhooks, as the
// HTTP API serves it. CodeWebhookNotFound for an unknown id,
// CodeWebhookURLRefused for a URL that may not be called,
// CodeInvalidRequest for the rest.
type EventAdmin interface {
	Events(ctx context.Context, f EventFilter) (EventPage, error)
	// CreateWebhook stores w (URL, Events, Description) and returns it with
	// its id and secret.
	CreateWebhook(ctx context.Context, w Webhook) (Webhook, error)
	ListWebhooks(ctx context.Context, p PageRequest) (WebhookPage, error)
	Webhook(ctx context.Context, id string) (Webhook, error)
	PatchWebhook(ctx context.Context, id string, p WebhookPatch) (Webhook, error)
	DeleteWebhook(ctx context.Context, id string) error
	Deliveries(ctx context.Context, f DeliveryFilter) (DeliveryPage, error)
}

// CheckPage validates a page size the way the listings do (DefaultPageLimit
// for 0).
func CheckPage(limit int) (int, error) { return checkLimit(limit) }

// DeliveryJob is a delivery claimed for one attempt: no other instance
// claims it until the attempt is recorded or its lease ends.
type DeliveryJob struct {
	WebhookID string
	URL       string
	Secret    string
	Event     Event
	// Attempt counts this one (1 for the first).
	Attempt int
	// CreatedAt is when the delivery was queued: retries stop a retry
	// period after it.
	CreatedAt time.Time
}

// DeliveryResult is the outcome of one attempt.
type DeliveryResult struct {
	WebhookID string
	EventID   int64
	// Attempt is the job's: an outcome recorded after another instance
	// claimed the delivery again (the lease ran out) changes nothing.
	Attempt int
	// Status is what the delivery becomes: DeliveryDelivered,
	// DeliveryPending (retried at NextAttemptAt) or DeliveryFailed.
	Status        DeliveryStatus
	NextAttemptAt time.Time
	HTTPStatus    int
	Error         string
}
