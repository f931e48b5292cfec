package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// EventRoutes returns a Config.Extra function that registers the event feed
// and the webhook administration; all need an admin key.
func EventRoutes(admin voucher.EventAdmin) func(mux *http.ServeMux, wrap func(route string, admin bool, h HandlerFunc) http.Handler) {
	e := eventRoutes{admin: admin}
	return func(mux *http.ServeMux, wrap func(string, bool, HandlerFunc) http.Handler) {
		for _, r := range []struct {
			route string
			h     HandlerFunc
		}{
			{"GET /events", e.events},
			{"POST /webhooks", e.create},
			{"GET /webhooks", e.list},
			{"GET /webhooks/{id}", e.get},
			{"PATCH /webhooks/{id}", e.patch},
			{"DELETE /webhooks/{id}", e.delete},
			{"GET /webhooks/{id}/deliveries", e.deliveries},
		} {
			mux.Handle(r.route, wrap(r.route, true, r.h))
		}
	}
}

type eventRoutes struct {
	admin voucher.EventAdmin
}

// notEmpty refuses a filter given empty: it selects nothing a client means.
func notEmpty(q url.Values, names ...string) error {
	for _, n := range names {
		if q.Has(n) && q.Get(n) == "" {
			return voucher.Errorf(voucher.CodeInvalidRequest, "query parameter %s is empty", n)
		}
	}
	return nil
}

// eventPageJSON is a page of GET /events: each event as delivered.
type eventPageJSON struct {
	Events []json.RawMessage `json:"events"`
	Next   string            `json:"next"`
}

func (e eventRoutes) events(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "limit", "after", "type", "code")
	if err != nil {
		return err
	}
	if err := notEmpty(q, "type", "code"); err != nil {
		return err
	}
	p, err := pageOf(q)
	if err != nil {
		return err
	}
	page, err := e.admin.Events(r.Context(), voucher.EventFilter{
		Type: voucher.EventType(q.Get("type")), Code: q.Get("code"), Limit: p.Limit, After: p.After})
	if err != nil {
		return err
	}
	out := eventPageJSON{Events: make([]json.RawMessage, 0, len(page.Events)), Next: page.Next}
	for _, ev := range page.Events {
		out.Events = append(out.Events, ev.JSON())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// webhookJSON is a webhook; the secret only in the answer to its creation.
type webhookJSON struct {
	ID          string              `json:"id"`
	URL         string              `json:"url"`
	Events      []voucher.EventType `json:"events"`
	Description string              `json:"description"`
	Active      bool                `json:"active"`
	Secret      string              `json:"secret,omitempty"`
	CreatedAt   time.Time           `json:"createdAt"`
	UpdatedAt   time.Time           `json:"updatedAt"`
}

func toWebhookJSON(h voucher.Webhook) webhookJSON {
	events := h.Events
	if events == nil {
		events = []voucher.EventType{}
	}
	return webhookJSON{ID: h.ID, URL: h.URL, Events: events, Description: h.Description, Active: h.Active,
		Secret: h.Secret, CreatedAt: h.CreatedAt.UTC(), UpdatedAt: h.UpdatedAt.UTC()}
}

var webhookFields = []string{"url", "events", "description", "active"}

// decodeWebhook reads a POST (active refused) or PATCH body.
func decodeWebhook(body []byte, patch bool) (voucher.WebhookPatch, error) {
	var p voucher.WebhookPatch
	_, err := decodeObject(body, webhookFields, func(i int, v jsonValue) error {
		switch webhookFields[i] {
		case "url", "description":
			s, err := stringField(webhookFields[i], v)
			if i == 0 {
				p.URL = &s
			} else {
				p.Description = &s
			}
			return err
		case "events":
			var list []voucher.EventType
			if v.kind != kindArray || json.Unmarshal(v.raw, &list) != nil {
				return voucher.Errorf(voucher.CodeInvalidRequest, "events must be an array of event types")
			}
			p.Events = &list
			return nil
		default:
			if !patch {
				return voucher.Errorf(voucher.CodeInvalidRequest, "unknown field active")
			}
			b, err := boolField("active", v)
			p.Active = &b
			return err
		}
	})
	return p, err
}

func (e eventRoutes) create(w http.ResponseWriter, r *http.Request) error {
	var p voucher.WebhookPatch
	if err := decodeBody(r, func(b []byte) (err error) { p, err = decodeWebhook(b, false); return err }); err != nil {
		return err
	}
	if p.URL == nil || p.Events == nil {
		return voucher.Errorf(voucher.CodeInvalidRequest, "url and events are required")
	}
	h := voucher.Webhook{URL: *p.URL, Events: *p.Events}
	if p.Description != nil {
		h.Description = *p.Description
	}
	created, err := e.admin.CreateWebhook(r.Context(), h)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/webhooks/"+created.ID)
	writeJSON(w, http.StatusCreated, toWebhookJSON(created))
	return nil
}

// webhookPageJSON is a page of GET /webhooks.
type webhookPageJSON struct {
	Webhooks []webhookJSON `json:"webhooks"`
	Next     string        `json:"next"`
}

func (e eventRoutes) list(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "limit", "after")
	if err != nil {
		return err
	}
	p, err := pageOf(q)
	if err != nil {
		return err
	}
	page, err := e.admin.ListWebhooks(r.Context(), p)
	if err != nil {
		return err
	}
	out := webhookPageJSON{Webhooks: make([]webhookJSON, 0, len(page.Webhooks)), Next: page.Next}
	for _, h := range page.Webhooks {
		out.Webhooks = append(out.Webhooks, toWebhookJSON(h))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (e eventRoutes) get(w http.ResponseWriter, r *http.Request) error {
	h, err := e.admin.Webhook(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toWebhookJSON(h))
	return nil
}

func (e eventRoutes) patch(w http.ResponseWriter, r *http.Request) error {
	var p voucher.WebhookPatch
	if err := decodeBody(r, func(b []byte) (err error) { p, err = decodeWebhook(b, true); return err }); err != nil {
		return err
	}
	h, err := e.admin.PatchWebhook(r.Context(), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toWebhookJSON(h))
	return nil
}

func (e eventRoutes) delete(w http.ResponseWriter, r *http.Request) error {
	if err := e.admin.DeleteWebhook(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deliveryJSON is one delivery of GET /webhooks/{id}/deliveries.
type deliveryJSON struct {
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

// deliveryPageJSON is a page of GET /webhooks/{id}/deliveries.
type deliveryPageJSON struct {
	Deliveries []deliveryJSON `json:"deliveries"`
	Next       string         `json:"next"`
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (e eventRoutes) deliveries(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "limit", "after", "status")
	if err != nil {
		return err
	}
	if err := notEmpty(q, "status"); err != nil {
		return err
	}
	p, err := pageOf(q)
	if err != nil {
		return err
	}
	page, err := e.admin.Deliveries(r.Context(), voucher.DeliveryFilter{WebhookID: r.PathValue("id"),
		Status: voucher.DeliveryStatus(q.Get("status")), Limit: p.Limit, After: p.After})
	if err != nil {
		return err
	}
	out := deliveryPageJSON{Deliveries: make([]deliveryJSON, 0, len(page.Deliveries)), Next: page.Next}
	for _, d := range page.Deliveries {
		dj := deliveryJSON{EventID: d.EventID, EventType: string(d.EventType), VoucherCode: d.VoucherCode,
			Status: string(d.Status), Attempts: d.Attempts, CreatedAt: d.CreatedAt.UTC(),
			LastAttemptAt: utcPtr(d.LastAttemptAt), LastStatus: d.LastStatus, LastError: d.LastError,
			DeliveredAt: utcPtr(d.DeliveredAt)}
		if d.Status == voucher.DeliveryPending {
			dj.NextAttemptAt = utcPtr(&d.NextAttemptAt)
		}
		out.Deliveries = append(out.Deliveries, dj)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
