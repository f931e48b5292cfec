// Package client is a small Go client for the voucherd HTTP API, meant for the
// order services that call voucherd at checkout.
//
// Every reservation is identified by its orderId, and the server is
// idempotent by orderId: retrying Reserve, Confirm or Release with the same
// orderId never takes a second use. The client relies on that and retries
// those calls (and reads) on connection errors, 429, 503 and other 5xx answers
// with exponential backoff and full jitter, always with the same orderId. It
// never retries a 4xx answer other than 429, and it never waits past the
// context's deadline.
//
// Errors answered by the server are returned as *Error; use IsCode to test
// for a code of the contract:
//
//	red, err := c.Reserve(ctx, "FLASH100", client.ReserveRequest{CustomerID: "cus_42", OrderID: "order-42", OrderAmount: 250000})
//	switch {
//	case client.IsCode(err, client.OutOfStock):
//		// sold out: check out without the voucher
//	case err != nil:
//		// voucherd unavailable or the request was rejected
//	}
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults used when an Option does not set them.
const (
	DefaultMaxAttempts    = 4
	DefaultBaseBackoff    = 50 * time.Millisecond
	DefaultMaxBackoff     = 2 * time.Second
	DefaultAttemptTimeout = 10 * time.Second
)

// maxErrorBody bounds how much of an error answer is read: error bodies are
// small JSON objects, and a misbehaving proxy must not make us buffer more.
const maxErrorBody = 64 << 10

// Client calls one voucherd deployment. It is safe for concurrent use.
type Client struct {
	baseURL        string
	token          string
	hc             *http.Client
	maxAttempts    int
	baseBackoff    time.Duration
	maxBackoff     time.Duration
	attemptTimeout time.Duration
	userAgent      string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the *http.Client used for every request (its Transport
// decides connection pooling). The default is a client with its own pooled
// transport.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithMaxAttempts sets how many times a retryable call is tried in total;
// 1 disables retries. Values below 1 keep the default (4).
func WithMaxAttempts(n int) Option {
	return func(c *Client) {
		if n >= 1 {
			c.maxAttempts = n
		}
	}
}

// WithBackoff sets the first backoff and its cap. The wait before attempt
// n+1 is a random duration in [0, min(max, base·2^(n-1))] (full jitter), so
// that many clients retrying after one failure do not come back in step.
func WithBackoff(base, max time.Duration) Option {
	return func(c *Client) {
		if base > 0 {
			c.baseBackoff = base
		}
		if max > 0 {
			c.maxBackoff = max
		}
	}
}

// WithAttemptTimeout bounds each attempt (default 10s); a timed-out attempt
// of a retryable call is retried while the context allows. Zero or negative
// keeps the default.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.attemptTimeout = d
		}
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a client for the voucherd at baseURL (for example
// "http://127.0.0.1:8080") that authenticates with the bearer token. Use the
// admin token for CreateVoucher and PatchVoucher.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{
		baseURL:        strings.TrimRight(baseURL, "/"),
		token:          token,
		maxAttempts:    DefaultMaxAttempts,
		baseBackoff:    DefaultBaseBackoff,
		maxBackoff:     DefaultMaxBackoff,
		attemptTimeout: DefaultAttemptTimeout,
		userAgent:      "voucherd-go-client",
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if c.maxBackoff < c.baseBackoff {
		c.maxBackoff = c.baseBackoff
	}
	return c
}

// Voucher is a limited-use discount code (see the README). Money is in integer minor
// units. Reserved, Confirmed and Remaining are live counts filled by the
// server on reads; they and the timestamps are ignored when creating a
// voucher.
//
// The discount is either DiscountAmount (fixed, in minor units) or
// DiscountPercent (1 to 100 with at most two decimals, e.g. 12.5) with an
// optional MaxDiscountAmount cap: exactly one of DiscountAmount and
// DiscountPercent is non-zero. A reservation answers the discount computed
// for its order (see Redemption.DiscountAmount).
type Voucher struct {
	Code           string `json:"code"`
	DiscountAmount int64  `json:"discountAmount,omitempty"`
	// DiscountPercent travels as a JSON number written with the fewest
	// digits that read back as the same float64, so a value with at most
	// two decimals reaches the server exactly; the server refuses one with
	// more (0.1+0.2, for instance) with InvalidRequest.
	DiscountPercent   float64   `json:"discountPercent,omitempty"`
	MaxDiscountAmount int64     `json:"maxDiscountAmount,omitempty"`
	MinOrderAmount    int64     `json:"minOrderAmount"`
	TotalLimit        int32     `json:"totalLimit"`
	PerUserLimit      int32     `json:"perUserLimit"`
	StartsAt          time.Time `json:"startsAt"`
	EndsAt            time.Time `json:"endsAt"`
	FlashSale         bool      `json:"flashSale"`
	// CustomerIDNormalization is "none" (the default when empty) or
	// "email": the voucher then counts e-mail addresses that reach one
	// mailbox as one customer (lower case, no +tag, no dots at gmail.com
	// and googlemail.com) and stores and answers that form. Set at creation
	// only.
	CustomerIDNormalization string `json:"customerIdNormalization,omitempty"`
	// Active is false once the voucher was stopped (Deactivate); read only:
	// a new voucher is always active.
	Active bool `json:"active,omitempty"`
	// Currency is the ISO 4217 code the voucher's amounts are in (EUR);
	// reservations and validations must then name the same one (else
	// NotEligible, ReasonCurrencyMismatch). Empty: any. Set at creation
	// only.
	Currency string `json:"currency,omitempty"`
	// CustomerID binds the voucher to one customer (answered in the form
	// CustomerIDNormalization gives it); any other is refused with
	// NotEligible, ReasonCustomerMismatch. Empty: every customer. Set at
	// creation only.
	CustomerID string `json:"customerId,omitempty"`
	// BudgetAmount is the money budget (0: none): the most discount money
	// the voucher's held uses may give out together. BudgetShortfall is
	// "reject" (the default) or "clip": give the last orders what is left.
	// Both are set at creation; UpdateVoucher may change BudgetAmount.
	BudgetAmount    int64  `json:"budgetAmount,omitempty"`
	BudgetShortfall string `json:"budgetShortfall,omitempty"`
	// BudgetReserved, BudgetConfirmed and BudgetRemaining are read only:
	// the discounts held by RESERVED and CONFIRMED uses, and what is left.
	BudgetReserved  int64 `json:"budgetReserved,omitempty"`
	BudgetConfirmed int64 `json:"budgetConfirmed,omitempty"`
	BudgetRemaining int64 `json:"budgetRemaining,omitempty"`
	// Schedule limits reservations to recurring windows, and WindowLimit
	// (0: none) the uses of each occurrence; set at creation, UpdateVoucher
	// may change both (a WindowLimit only on a voucher created with one).
	Schedule    *Schedule `json:"schedule,omitempty"`
	WindowLimit int32     `json:"windowLimit,omitempty"`
	// CurrentWindow (the occurrence covering now, with its counts) and
	// NextWindowAt (outside every window) are read only, filled by
	// Voucher.
	CurrentWindow *CurrentWindow `json:"currentWindow,omitempty"`
	NextWindowAt  time.Time      `json:"nextWindowAt,omitzero"`
	// Stacking says whether the voucher may share an order with other
	// codes (nil: not given; not stackable at creation).
	Stacking *Stacking `json:"stacking,omitempty"`

	Reserved  int32     `json:"reserved,omitempty"`
	Confirmed int32     `json:"confirmed,omitempty"`
	Remaining int32     `json:"remaining,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// voucherCreate is the body of POST /vouchers: only the fields a client may
// set, with zero limits left out so the server applies its defaults.
type voucherCreate struct {
	Code              string    `json:"code"`
	DiscountAmount    int64     `json:"discountAmount,omitempty"`
	DiscountPercent   float64   `json:"discountPercent,omitempty"`
	MaxDiscountAmount int64     `json:"maxDiscountAmount,omitempty"`
	MinOrderAmount    int64     `json:"minOrderAmount"`
	TotalLimit        int32     `json:"totalLimit"`
	PerUserLimit      int32     `json:"perUserLimit,omitempty"`
	StartsAt          time.Time `json:"startsAt"`
	EndsAt            time.Time `json:"endsAt"`
	FlashSale         bool      `json:"flashSale"`

	CustomerIDNormalization string `json:"customerIdNormalization,omitempty"`
	Currency                string `json:"currency,omitempty"`
	CustomerID              string `json:"customerId,omitempty"`

	BudgetAmount    int64     `json:"budgetAmount,omitempty"`
	BudgetShortfall string    `json:"budgetShortfall,omitempty"`
	Stacking        *Stacking `json:"stacking,omitempty"`
	Schedule        *Schedule `json:"schedule,omitempty"`
	WindowLimit     int32     `json:"windowLimit,omitempty"`
}

// Schedule is a voucher's recurring windows: wall-clock times in TimeZone
// (an IANA name such as Europe/Berlin). An occurrence of a window runs from
// the first instant the local clock reads From or later to the first it
// reads To or later (the server's docs/rules.md, "Recurring windows").
type Schedule struct {
	TimeZone string   `json:"timeZone"`
	Windows  []Window `json:"windows"`
}

// Window is one recurring window: on each of Days (MON..SUN), from From to
// To ("HH:MM", From before To; To may be "24:00").
type Window struct {
	Days []string `json:"days"`
	From string   `json:"from"`
	To   string   `json:"to"`
}

// CurrentWindow is the occurrence of a voucher's windows covering now;
// Used and Remaining are set for a voucher with a WindowLimit.
type CurrentWindow struct {
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	Used      int32     `json:"used,omitempty"`
	Remaining int32     `json:"remaining,omitempty"`
}

// VoucherPatch changes some fields of a voucher; nil fields stay as they are.
// Limits may be raised, and lowered no further than what is already held
// (the server answers LimitBelowHeld otherwise). DiscountAmount makes the
// discount fixed; DiscountPercent makes it a percentage (keeping the cap of
// a percentage unless MaxDiscountAmount is set); MaxDiscountAmount is set
// only with DiscountPercent (repeat the percentage to change the cap
// alone). Redemptions keep the discount computed when they were reserved.
type VoucherPatch struct {
	DiscountAmount    *int64     `json:"discountAmount,omitempty"`
	DiscountPercent   *float64   `json:"discountPercent,omitempty"`
	MaxDiscountAmount *int64     `json:"maxDiscountAmount,omitempty"`
	MinOrderAmount    *int64     `json:"minOrderAmount,omitempty"`
	TotalLimit        *int32     `json:"totalLimit,omitempty"`
	PerUserLimit      *int32     `json:"perUserLimit,omitempty"`
	StartsAt          *time.Time `json:"startsAt,omitempty"`
	EndsAt            *time.Time `json:"endsAt,omitempty"`
	FlashSale         *bool      `json:"flashSale,omitempty"`
	// Active stops (false) or restarts (true) the voucher; see Deactivate.
	Active *bool `json:"active,omitempty"`
	// BudgetAmount changes the money budget of a voucher that has one; not
	// below what is held (LimitBelowHeld).
	BudgetAmount *int64 `json:"budgetAmount,omitempty"`
	// Schedule replaces the recurring windows; WindowLimit changes the
	// quota per occurrence of a voucher that has one (not below what the
	// current occurrence holds: LimitBelowHeld).
	Schedule    *Schedule `json:"schedule,omitempty"`
	WindowLimit *int32    `json:"windowLimit,omitempty"`
	// Stacking replaces the stacking setting.
	Stacking *Stacking `json:"stacking,omitempty"`
}

// Redemption states.
const (
	StatusReserved  = "RESERVED"
	StatusConfirmed = "CONFIRMED"
	StatusReleased  = "RELEASED"
)

// Redemption is one order's use of a voucher. Reserve answers with OrderID,
// DiscountAmount, Status and ExpiresAt; reads and state changes may fill the
// other fields too. DiscountAmount is the discount computed for this order
// when it was reserved, in minor units: a fixed discount up to the order
// amount, or the percentage of the order amount rounded down to the minor
// unit and at most the cap (possibly 0 on a tiny order). Replays and reads answer the same
// amount even after the voucher's discount was patched.
type Redemption struct {
	OrderID     string `json:"orderId"`
	VoucherCode string `json:"voucherCode,omitempty"`
	// CustomerID is the customer as the voucher counts it (normalised when
	// the voucher normalises customerIds).
	CustomerID     string    `json:"customerId,omitempty"`
	OrderAmount    int64     `json:"orderAmount,omitempty"`
	DiscountAmount int64     `json:"discountAmount"`
	Status         string    `json:"status"`
	ExpiresAt      time.Time `json:"expiresAt,omitzero"`
	CreatedAt      time.Time `json:"createdAt,omitzero"`
	UpdatedAt      time.Time `json:"updatedAt,omitzero"`
	// Clipped is set by Reserve when the voucher's money budget gave this
	// order what was left of it, less than its discount.
	Clipped bool `json:"clipped,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler: the server writes an integer
// customerId ("42") as a JSON number, for the clients that sent integers,
// and any other as a string; both are read as the string.
func (r *Redemption) UnmarshalJSON(b []byte) error {
	type plain Redemption
	var w struct {
		*plain
		CustomerID json.RawMessage `json:"customerId"`
	}
	w.plain = (*plain)(r)
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	r.CustomerID = ""
	if len(w.CustomerID) == 0 || string(w.CustomerID) == "null" {
		return nil
	}
	if w.CustomerID[0] == '"' {
		return json.Unmarshal(w.CustomerID, &r.CustomerID)
	}
	var n json.Number
	if err := json.Unmarshal(w.CustomerID, &n); err != nil {
		return fmt.Errorf("client: customerId %s: %w", w.CustomerID, err)
	}
	r.CustomerID = n.String()
	return nil
}

// ReserveRequest asks for one use of a voucher for one order. OrderID is the
// idempotency key: generate it once per checkout attempt and reuse it on
// every retry.
type ReserveRequest struct {
	// CustomerID is 1 to 64 characters of letters, digits and . _ : - @ +
	// (a UUID, "cus_...", an e-mail address, a hash in hex, an integer's
	// digits). The per-customer limit counts uses by this string.
	CustomerID  string `json:"customerId"`
	OrderID     string `json:"orderId"`
	OrderAmount int64  `json:"orderAmount"`
	// ReplacesOrderID, when set, names the same customer's RESERVED order
	// on this voucher whose use the new order takes over in one atomic
	// step: a retry after a failed payment with a new orderId. The
	// replaced order answers ORDER_RELEASED afterwards;
	// ReplacedOrderNotHeld when it is not such a hold (nothing changed).
	ReplacesOrderID string `json:"replacesOrderId,omitempty"`
	// Currency is the ISO 4217 code of OrderAmount; a voucher with a
	// currency requires it.
	Currency string `json:"currency,omitempty"`
}

// ValidateRequest asks whether a reservation would succeed now. OrderID is
// optional.
type ValidateRequest struct {
	// CustomerID is as in ReserveRequest.
	CustomerID  string `json:"customerId"`
	OrderID     string `json:"orderId,omitempty"`
	OrderAmount int64  `json:"orderAmount"`
	// Currency is as in ReserveRequest.
	Currency string `json:"currency,omitempty"`
}

// Validation is the answer to Validate: what a reservation made at the
// same moment would answer.
type Validation struct {
	// Valid: the reservation would take a use, or (Replay) answer the
	// orderId's existing hold.
	Valid          bool  `json:"valid"`
	Replay         bool  `json:"replay,omitempty"`
	DiscountAmount int64 `json:"discountAmount"`
	// Code is the reservation's error code when not valid (OutOfStock,
	// HeldOut, AlreadyUsed, NotEligible, OrderConflict, OrderReleased);
	// Reason the NotEligible reason, else Code.
	Code    string `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// RetryAfterSeconds is HeldOut's wait until the earliest hold expires.
	RetryAfterSeconds int64 `json:"retryAfter,omitempty"`
	// Limit, BudgetRemaining and NextWindowAt are as in Error.
	Limit           string    `json:"limit,omitempty"`
	BudgetRemaining int64     `json:"budgetRemaining,omitempty"`
	NextWindowAt    time.Time `json:"nextWindowAt,omitzero"`
}

// CreateVoucher creates a voucher (admin token). It is not retried: a lost
// answer would make the retry fail with VoucherExists.
func (c *Client) CreateVoucher(ctx context.Context, v Voucher) (*Voucher, error) {
	body := voucherCreate{
		Code: v.Code, DiscountAmount: v.DiscountAmount, DiscountPercent: v.DiscountPercent,
		MaxDiscountAmount: v.MaxDiscountAmount, MinOrderAmount: v.MinOrderAmount,
		TotalLimit: v.TotalLimit, PerUserLimit: v.PerUserLimit,
		StartsAt: v.StartsAt, EndsAt: v.EndsAt, FlashSale: v.FlashSale,
		CustomerIDNormalization: v.CustomerIDNormalization, Currency: v.Currency, CustomerID: v.CustomerID,
		BudgetAmount: v.BudgetAmount, BudgetShortfall: v.BudgetShortfall, Stacking: v.Stacking,
		Schedule: v.Schedule, WindowLimit: v.WindowLimit,
	}
	var out Voucher
	if err := c.call(ctx, http.MethodPost, "/vouchers", body, &out, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetVoucher returns a voucher with its live counts.
func (c *Client) GetVoucher(ctx context.Context, code string) (*Voucher, error) {
	var out Voucher
	if err := c.call(ctx, http.MethodGet, "/vouchers/"+url.PathEscape(code), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// PatchVoucher changes a voucher (admin token). It is not retried.
func (c *Client) PatchVoucher(ctx context.Context, code string, p VoucherPatch) (*Voucher, error) {
	var out Voucher
	if err := c.call(ctx, http.MethodPatch, "/vouchers/"+url.PathEscape(code), p, &out, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// Reserve takes one use of the voucher for the order. Retries resend the same
// orderId, so at most one use is taken however many attempts it needs.
func (c *Client) Reserve(ctx context.Context, code string, r ReserveRequest) (*Redemption, error) {
	var out Redemption
	if err := c.call(ctx, http.MethodPost, "/vouchers/"+url.PathEscape(code)+"/reservations", r, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// Validate answers whether a reservation would succeed now, taking nothing;
// a refusal is a Validation with Valid false, not an error. It writes
// nothing, so it is retried like a read.
func (c *Client) Validate(ctx context.Context, code string, r ValidateRequest) (*Validation, error) {
	var out Validation
	if err := c.call(ctx, http.MethodPost, "/vouchers/"+url.PathEscape(code)+"/validation", r, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetReservation returns the redemption of an order.
func (c *Client) GetReservation(ctx context.Context, code, orderID string) (*Redemption, error) {
	var out Redemption
	if err := c.call(ctx, http.MethodGet, reservationPath(code, orderID), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// Confirm marks a reservation as used by a paid order. It is idempotent.
func (c *Client) Confirm(ctx context.Context, code, orderID string) (*Redemption, error) {
	var out Redemption
	if err := c.call(ctx, http.MethodPost, reservationPath(code, orderID)+"/confirm", nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// Release gives the use back (order cancelled or refunded). It is idempotent;
// a released orderId cannot reserve again.
func (c *Client) Release(ctx context.Context, code, orderID string) (*Redemption, error) {
	var out Redemption
	if err := c.call(ctx, http.MethodDelete, reservationPath(code, orderID), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// Extend pushes a RESERVED hold's expiry seconds further (a slow payment),
// bounded by the server's maximum total hold time. It is idempotent: the
// same call again leaves the expiry where it is. A confirmed hold answers
// ReservationConfirmed, a released one ReservationReleased.
func (c *Client) Extend(ctx context.Context, code, orderID string, seconds int) (*Redemption, error) {
	var out Redemption
	in := struct {
		Seconds int `json:"seconds"`
	}{seconds}
	if err := c.call(ctx, http.MethodPost, reservationPath(code, orderID)+"/extend", in, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

func reservationPath(code, orderID string) string {
	return "/vouchers/" + url.PathEscape(code) + "/reservations/" + url.PathEscape(orderID)
}

// call sends one logical request, retrying it when retry is set and the
// failure is one a retry can fix.
func (c *Client) call(ctx context.Context, method, path string, in, out any, retry bool) error {
	var payload []byte
	if in != nil {
		var err error
		if payload, err = json.Marshal(in); err != nil {
			return fmt.Errorf("client: encode %s %s: %w", method, path, err)
		}
	}
	attempts := 1
	if retry {
		attempts = c.maxAttempts
	}
	var lastErr error
	// unknown: an earlier attempt may have taken effect (a transport
	// failure, or a 503 marked OutcomeUnknown).
	unknown := false
	for attempt := 1; ; attempt++ {
		err := c.do(ctx, method, path, payload, out)
		if err == nil {
			return nil
		}
		err = stickyUnknown(err, unknown)
		unknown = unknown || mayHaveTakenEffect(err)
		lastErr = err
		if ctx.Err() != nil {
			return fmt.Errorf("client: %s %s: %w (last attempt: %w)", method, path, ctx.Err(), lastErr)
		}
		if attempt >= attempts || !Retryable(err) {
			return err
		}
		wait := c.backoff(attempt)
		var apiErr *Error
		if errors.As(err, &apiErr) && apiErr.RetryAfter > wait {
			wait = apiErr.RetryAfter
		}
		// Waiting past the deadline only to fail is worse than failing now
		// with the real cause.
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("client: %s %s: %w (last attempt: %w)", method, path, ctx.Err(), lastErr)
		case <-t.C:
		}
	}
}

// backoff returns the jittered wait after the given failed attempt (1-based).
func (c *Client) backoff(attempt int) time.Duration {
	d := c.baseBackoff
	for i := 1; i < attempt && d < c.maxBackoff; i++ {
		d *= 2
	}
	if d > c.maxBackoff {
		d = c.maxBackoff
	}
	return rand.N(d + 1) //nolint:gosec // G404: retry jitter spreads clients apart; it needs no unpredictability
}

// do sends one attempt.
func (c *Client) do(ctx context.Context, method, path string, payload []byte, out any) error {
	actx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
	defer cancel()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, method, c.baseURL+path, body)
	if err != nil {
		return &requestError{err: fmt.Errorf("client: %s %s: %w", method, path, err)}
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &TransportError{Method: method, Path: path, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		// The server answered 2xx, so the action may have happened; a body
		// we cannot read is a transport problem, retried like one.
		return &TransportError{Method: method, Path: path, Err: fmt.Errorf("decode %d answer: %w", resp.StatusCode, err)}
	}
	// Drain so the connection goes back to the pool.
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// decodeError turns a non-2xx answer into *Error.
func decodeError(resp *http.Response) *Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{Status: resp.StatusCode}
	var body struct {
		Error   string `json:"error"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
		// RetryAfter in seconds mirrors the header for clients that do
		// not see headers (some proxies drop them).
		RetryAfter      int64     `json:"retryAfter"`
		OutcomeUnknown  bool      `json:"outcomeUnknown"`
		Limit           string    `json:"limit"`
		BudgetRemaining int64     `json:"budgetRemaining"`
		NextWindowAt    time.Time `json:"nextWindowAt"`
		FailedCode      string    `json:"failedCode"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error != "" {
		e.Code, e.Message, e.Reason = body.Error, body.Message, body.Reason
		e.OutcomeUnknown = body.OutcomeUnknown
		e.Limit, e.BudgetRemaining, e.NextWindowAt = body.Limit, body.BudgetRemaining, body.NextWindowAt
		e.FailedCode = body.FailedCode
		if body.RetryAfter > 0 {
			e.RetryAfter = time.Duration(body.RetryAfter) * time.Second
		}
	} else {
		// Not our error format (a proxy, a load balancer): keep what there is.
		e.Message = strings.TrimSpace(string(raw))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			if d := time.Until(t); d > 0 {
				e.RetryAfter = d
			}
		}
	}
	return e
}
