package client

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Webhook deliveries (docs/events.md): voucherd POSTs each event's JSON with
// the headers Voucherd-Event-Id and Voucherd-Signature, "t=<unix
// seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the webhook's
// secret>". A receiver verifies the signature over the raw body before it
// parses it, refuses old timestamps (replays), and drops an event id it has
// already handled (deliveries are at least once).

// Webhook header names.
const (
	HeaderEventID   = "Voucherd-Event-Id"
	HeaderSignature = "Voucherd-Signature"
)

// DefaultSignatureTolerance is how old a signature VerifyWebhook accepts by
// default.
const DefaultSignatureTolerance = 5 * time.Minute

// ErrBadSignature is returned by VerifyWebhook for a delivery whose
// signature does not verify, is malformed or is too old.
var ErrBadSignature = errors.New("voucherd webhook: signature does not verify")

// Event is one delivered (or listed) event.
type Event struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
}

// VerifyWebhook checks the Voucherd-Signature header of a delivery against
// its raw body and the webhook's secret, refusing a signature made more than
// tolerance before now (DefaultSignatureTolerance when 0), and returns the
// event. A header with several v1 values (a secret being rotated) verifies
// when one does.
func VerifyWebhook(secret, header string, body []byte, now time.Time, tolerance time.Duration) (*Event, error) {
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return nil, ErrBadSignature
	}
	if age := now.Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return nil, ErrBadSignature
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	want := []byte(hex.EncodeToString(m.Sum(nil)))
	ok := false
	for _, s := range sigs {
		ok = ok || hmac.Equal(want, []byte(s))
	}
	if !ok {
		return nil, ErrBadSignature
	}
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Webhook is a subscription of a URL to event types; Secret is set only in
// the answer to CreateWebhook.
type Webhook struct {
	ID          string    `json:"id"`
	URL         string    `json:"url"`
	Events      []string  `json:"events"`
	Description string    `json:"description"`
	Active      bool      `json:"active"`
	Secret      string    `json:"secret,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// NewWebhook is the body of CreateWebhook.
type NewWebhook struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description,omitempty"`
}

// WebhookPatch changes the fields it sets.
type WebhookPatch struct {
	URL         *string   `json:"url,omitempty"`
	Events      *[]string `json:"events,omitempty"`
	Description *string   `json:"description,omitempty"`
	Active      *bool     `json:"active,omitempty"`
}

// WebhookPage is one page of webhooks; an empty Next means the last page.
type WebhookPage struct {
	Webhooks []Webhook `json:"webhooks"`
	Next     string    `json:"next"`
}

// Delivery is one event sent (or to send) to one webhook.
type Delivery struct {
	EventID       int64      `json:"eventId"`
	EventType     string     `json:"eventType"`
	VoucherCode   string     `json:"voucherCode"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	CreatedAt     time.Time  `json:"createdAt"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	LastAttemptAt *time.Time `json:"lastAttemptAt"`
	LastStatus    int        `json:"lastStatus,omitempty"`
	LastError     string     `json:"lastError,omitempty"`
	DeliveredAt   *time.Time `json:"deliveredAt"`
}

// DeliveryPage is one page of deliveries; an empty Next means the last
// page.
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	Next       string     `json:"next"`
}

// EventQuery selects events of the feed; zero fields select all.
type EventQuery struct {
	Type string
	Code string
	Page
}

// EventPage is one page of the feed. Next is set on every page: ask again
// with it for the events written since.
type EventPage struct {
	Events []Event `json:"events"`
	Next   string  `json:"next"`
}

// CreateWebhook subscribes a URL (admin key); the answer holds the secret,
// shown only here. Not retried: a retry would create a second webhook.
func (c *Client) CreateWebhook(ctx context.Context, w NewWebhook) (*Webhook, error) {
	var out Webhook
	if err := c.call(ctx, http.MethodPost, "/webhooks", w, &out, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWebhooks returns one page of webhooks (admin key). Safe to retry.
func (c *Client) ListWebhooks(ctx context.Context, p Page) (*WebhookPage, error) {
	var out WebhookPage
	if err := c.call(ctx, http.MethodGet, withQuery("/webhooks", p.values()), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetWebhook returns a webhook without its secret (admin key).
func (c *Client) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	var out Webhook
	if err := c.call(ctx, http.MethodGet, "/webhooks/"+url.PathEscape(id), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// PatchWebhook changes a webhook (admin key). Safe to retry.
func (c *Client) PatchWebhook(ctx context.Context, id string, p WebhookPatch) (*Webhook, error) {
	var out Webhook
	if err := c.call(ctx, http.MethodPatch, "/webhooks/"+url.PathEscape(id), p, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteWebhook deletes a webhook and its deliveries (admin key).
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/webhooks/"+url.PathEscape(id), nil, nil, true)
}

// WebhookDeliveries returns one page of a webhook's deliveries, oldest
// event first, optionally of one status (pending, delivered, failed).
func (c *Client) WebhookDeliveries(ctx context.Context, id, status string, p Page) (*DeliveryPage, error) {
	q := p.values()
	if status != "" {
		q.Set("status", status)
	}
	var out DeliveryPage
	if err := c.call(ctx, http.MethodGet, withQuery("/webhooks/"+url.PathEscape(id)+"/deliveries", q), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// Events returns one page of the event feed (admin key). Safe to retry.
func (c *Client) Events(ctx context.Context, q EventQuery) (*EventPage, error) {
	v := q.values()
	if q.Type != "" {
		v.Set("type", q.Type)
	}
	if q.Code != "" {
		v.Set("code", q.Code)
	}
	var out EventPage
	if err := c.call(ctx, http.MethodGet, withQuery("/events", v), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}
