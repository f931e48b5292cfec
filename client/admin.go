package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// WarmupResult is the answer of Warmup.
type WarmupResult struct {
	// InRedis reports that the voucher is in the server's Redis gate now.
	// It is false only when another instance was still loading it after a
	// short wait: call Warmup again.
	InRedis bool `json:"inRedis"`
	// LoadedByThisCall reports that this call wrote it (false: it was
	// there already, or another instance loaded it).
	LoadedByThisCall bool `json:"loadedByThisCall"`
}

// Warmup loads a flash voucher into the server's Redis gate (admin token).
// Safe to retry.
func (c *Client) Warmup(ctx context.Context, code string) (WarmupResult, error) {
	var out WarmupResult
	err := c.call(ctx, http.MethodPost, "/vouchers/"+url.PathEscape(code)+"/warmup", nil, &out, true)
	return out, err
}

// Voucher states of ListVouchers.
const (
	StateActive    = "active"
	StateScheduled = "scheduled"
	StateEnded     = "ended"
	StateDisabled  = "disabled"
)

// Page asks for one page of a listing: Limit rows (the server's default,
// 100, when 0; at most 1000) after the cursor After, the Next of the previous
// page (empty for the first).
type Page struct {
	Limit int
	After string
}

func (p Page) values() url.Values {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	return q
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// VoucherQuery selects vouchers; zero fields select all. State is one of
// StateActive (ordered by end, soonest first), StateScheduled (by start,
// soonest first), StateEnded (by end, latest first), StateDisabled or ""
// (both by code).
type VoucherQuery struct {
	State      string
	FlashSale  *bool
	CodePrefix string
	Page
}

// VoucherPage is one page of vouchers with their live counts; an empty Next
// means the last page.
type VoucherPage struct {
	Vouchers []Voucher `json:"vouchers"`
	Next     string    `json:"next"`
}

// ListVouchers returns one page of vouchers (admin key). Safe to retry.
func (c *Client) ListVouchers(ctx context.Context, q VoucherQuery) (*VoucherPage, error) {
	v := q.values()
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.FlashSale != nil {
		v.Set("flashSale", strconv.FormatBool(*q.FlashSale))
	}
	if q.CodePrefix != "" {
		v.Set("codePrefix", q.CodePrefix)
	}
	var out VoucherPage
	if err := c.call(ctx, http.MethodGet, withQuery("/vouchers", v), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReservationQuery selects a voucher's reservations; zero fields select all.
type ReservationQuery struct {
	Status     string
	CustomerID string
	Page
}

// ReservationPage is one page of a voucher's reservations, oldest first.
type ReservationPage struct {
	Reservations []Redemption `json:"reservations"`
	Next         string       `json:"next"`
}

// ListReservations returns one page of a voucher's reservations in every
// state (admin key). Safe to retry.
func (c *Client) ListReservations(ctx context.Context, code string, q ReservationQuery) (*ReservationPage, error) {
	v := q.values()
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.CustomerID != "" {
		v.Set("customerId", q.CustomerID)
	}
	var out ReservationPage
	path := withQuery("/vouchers/"+url.PathEscape(code)+"/reservations", v)
	if err := c.call(ctx, http.MethodGet, path, nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// RedemptionPage is one page of a customer's redemptions, oldest first.
type RedemptionPage struct {
	Redemptions []Redemption `json:"redemptions"`
	Next        string       `json:"next"`
}

// CustomerRedemptions returns one page of a customer's redemptions of every
// voucher (admin key): "did this customer use a code, with which order?".
// Safe to retry.
func (c *Client) CustomerRedemptions(ctx context.Context, customerID string, p Page) (*RedemptionPage, error) {
	var out RedemptionPage
	path := withQuery("/customers/"+url.PathEscape(customerID)+"/redemptions", p.values())
	if err := c.call(ctx, http.MethodGet, path, nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// AuditEntry is one recorded change of a voucher: its action (create,
// patch, activate, deactivate, reconcile; for a campaign's budget also
// add_codes and export_codes), the name of the API key that made
// it, when, and the voucher's settings before and after as JSON (Before is
// null for a create; a reconciliation records its report as After).
type AuditEntry struct {
	ID      int64           `json:"id"`
	Code    string          `json:"code"`
	Action  string          `json:"action"`
	KeyName string          `json:"keyName"`
	At      time.Time       `json:"at"`
	Before  json.RawMessage `json:"before"`
	After   json.RawMessage `json:"after"`
}

// AuditPage is one page of a voucher's audit trail, oldest first.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    string       `json:"next"`
}

// Audit returns one page of a voucher's audit trail (admin key). Safe to
// retry.
func (c *Client) Audit(ctx context.Context, code string, p Page) (*AuditPage, error) {
	var out AuditPage
	path := withQuery("/vouchers/"+url.PathEscape(code)+"/audit", p.values())
	if err := c.call(ctx, http.MethodGet, path, nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// Deactivate stops a voucher (admin key): new reservations are refused with
// NotEligible, reason ReasonDisabled; holds made before may still be
// confirmed or released, and the voucher's window is kept. Safe to retry.
func (c *Client) Deactivate(ctx context.Context, code string) (*Voucher, error) {
	return c.setActive(ctx, code, false)
}

// Activate restarts a stopped voucher (admin key). Safe to retry.
func (c *Client) Activate(ctx context.Context, code string) (*Voucher, error) {
	return c.setActive(ctx, code, true)
}

func (c *Client) setActive(ctx context.Context, code string, active bool) (*Voucher, error) {
	var out Voucher
	err := c.call(ctx, http.MethodPatch, "/vouchers/"+url.PathEscape(code), VoucherPatch{Active: &active}, &out, true)
	if err != nil {
		return nil, err
	}
	return &out, nil
}
