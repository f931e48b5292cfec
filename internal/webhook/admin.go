package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Service administers webhooks and serves the feed; it implements
// voucher.EventAdmin.
type Service struct {
	cfg Config
}

var _ voucher.EventAdmin = (*Service)(nil)

// NewService returns the administration of cfg.Store.
func NewService(cfg Config) (*Service, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg}, nil
}

// Limits of a webhook's fields.
const (
	maxDescription = 256
	maxWebhookID   = 64
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

func checkEvents(list []voucher.EventType) error {
	if len(list) == 0 {
		return voucher.Errorf(voucher.CodeInvalidRequest, "events must name at least one event type")
	}
	seen := map[voucher.EventType]bool{}
	for _, e := range list {
		if !voucher.ValidEventType(e) {
			return voucher.Errorf(voucher.CodeInvalidRequest, "unknown event type %q", e)
		}
		if seen[e] {
			return voucher.Errorf(voucher.CodeInvalidRequest, "event type %q is listed twice", e)
		}
		seen[e] = true
	}
	return nil
}

// checkDescription refuses what PostgreSQL cannot store (NUL) together with
// every other control character, as a campaign's name does.
func checkDescription(d string) error {
	if utf8.RuneCountInString(d) > maxDescription || strings.ContainsFunc(d, unicode.IsControl) {
		return voucher.Errorf(voucher.CodeInvalidRequest, "description must be at most %d characters, none a control character", maxDescription)
	}
	return nil
}

// CreateWebhook implements voucher.EventAdmin: the URL is checked, the id
// and the secret are drawn.
func (s *Service) CreateWebhook(ctx context.Context, w voucher.Webhook) (voucher.Webhook, error) {
	if err := checkEvents(w.Events); err != nil {
		return w, err
	}
	if err := checkDescription(w.Description); err != nil {
		return w, err
	}
	if err := CheckURL(ctx, s.cfg.Resolver, w.URL, s.cfg.AllowPrivate); err != nil {
		return w, err
	}
	w.ID = "wh_" + randomHex(12)
	w.Secret = "whsec_" + randomHex(24)
	return s.cfg.Store.CreateWebhook(ctx, w)
}

// ListWebhooks implements voucher.EventAdmin; secrets are not listed.
func (s *Service) ListWebhooks(ctx context.Context, p voucher.PageRequest) (voucher.WebhookPage, error) {
	var err error
	if p.Limit, err = voucher.CheckPage(p.Limit); err != nil {
		return voucher.WebhookPage{}, err
	}
	page, err := s.cfg.Store.ListWebhooks(ctx, p)
	for i := range page.Webhooks {
		page.Webhooks[i].Secret = ""
	}
	return page, err
}

func checkID(id string) error {
	if id == "" || len(id) > maxWebhookID || strings.ContainsAny(id, " /?#") {
		return voucher.Errorf(voucher.CodeWebhookNotFound, "no webhook %s", id)
	}
	return nil
}

// Webhook implements voucher.EventAdmin; the secret is not answered.
func (s *Service) Webhook(ctx context.Context, id string) (voucher.Webhook, error) {
	if err := checkID(id); err != nil {
		return voucher.Webhook{}, err
	}
	w, err := s.cfg.Store.Webhook(ctx, id)
	w.Secret = ""
	return w, err
}

// PatchWebhook implements voucher.EventAdmin; a new URL is checked as at
// creation.
func (s *Service) PatchWebhook(ctx context.Context, id string, p voucher.WebhookPatch) (voucher.Webhook, error) {
	if err := checkID(id); err != nil {
		return voucher.Webhook{}, err
	}
	if p.Events != nil {
		if err := checkEvents(*p.Events); err != nil {
			return voucher.Webhook{}, err
		}
	}
	if p.Description != nil {
		if err := checkDescription(*p.Description); err != nil {
			return voucher.Webhook{}, err
		}
	}
	if p.URL != nil {
		if err := CheckURL(ctx, s.cfg.Resolver, *p.URL, s.cfg.AllowPrivate); err != nil {
			return voucher.Webhook{}, err
		}
	}
	w, err := s.cfg.Store.PatchWebhook(ctx, id, p)
	w.Secret = ""
	return w, err
}

// DeleteWebhook implements voucher.EventAdmin.
func (s *Service) DeleteWebhook(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return s.cfg.Store.DeleteWebhook(ctx, id)
}

// Deliveries implements voucher.EventAdmin.
func (s *Service) Deliveries(ctx context.Context, f voucher.DeliveryFilter) (voucher.DeliveryPage, error) {
	if err := checkID(f.WebhookID); err != nil {
		return voucher.DeliveryPage{}, err
	}
	switch f.Status {
	case "", voucher.DeliveryPending, voucher.DeliveryDelivered, voucher.DeliveryFailed:
	default:
		return voucher.DeliveryPage{}, voucher.Errorf(voucher.CodeInvalidRequest, "status must be pending, delivered or failed")
	}
	var err error
	if f.Limit, err = voucher.CheckPage(f.Limit); err != nil {
		return voucher.DeliveryPage{}, err
	}
	return s.cfg.Store.Deliveries(ctx, f)
}

// Events implements voucher.EventAdmin: the feed.
func (s *Service) Events(ctx context.Context, f voucher.EventFilter) (voucher.EventPage, error) {
	if f.Type != "" && !voucher.ValidEventType(f.Type) {
		return voucher.EventPage{}, voucher.Errorf(voucher.CodeInvalidRequest, "unknown event type %q", f.Type)
	}
	if f.Code != "" && !voucher.ValidCode(f.Code) {
		return voucher.EventPage{}, voucher.Errorf(voucher.CodeInvalidRequest, "code must be 1-32 characters of A-Z a-z 0-9 _ -")
	}
	var err error
	if f.Limit, err = voucher.CheckPage(f.Limit); err != nil {
		return voucher.EventPage{}, err
	}
	return s.cfg.Store.Events(ctx, f)
}
