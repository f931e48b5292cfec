package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Stacking says whether a voucher may be reserved together with other
// codes on one order; a stack holds at most one code of each
// ExclusiveGroup.
type Stacking struct {
	Stackable      bool   `json:"stackable"`
	ExclusiveGroup string `json:"exclusiveGroup,omitempty"`
}

// StackRequest asks for one use of each of 1 to 5 distinct codes for one
// order, all or none. The discounts apply in the order of Codes, each to
// what the earlier ones left of OrderAmount.
type StackRequest struct {
	// CustomerID is as in ReserveRequest.
	CustomerID  string   `json:"customerId"`
	OrderID     string   `json:"orderId"`
	OrderAmount int64    `json:"orderAmount"`
	Codes       []string `json:"codes"`
	Currency    string   `json:"currency,omitempty"`
}

// StackItem is one code of a stack.
type StackItem struct {
	Code           string `json:"code"`
	DiscountAmount int64  `json:"discountAmount"`
	// Status is set by the calls on an existing stack.
	Status string `json:"status,omitempty"`
}

// Stack is an order holding several codes. ReserveStack answers OrderID,
// Status, ExpiresAt, DiscountAmount (the total) and Items; the calls on an
// existing stack add CustomerID, OrderAmount and each item's Status.
type Stack struct {
	OrderID        string      `json:"orderId"`
	CustomerID     string      `json:"customerId,omitempty"`
	OrderAmount    int64       `json:"orderAmount,omitempty"`
	Status         string      `json:"status"`
	ExpiresAt      time.Time   `json:"expiresAt"`
	DiscountAmount int64       `json:"discountAmount"`
	Items          []StackItem `json:"items"`
}

// UnmarshalJSON implements json.Unmarshaler: an integer customerId is
// read as its string, as for Redemption.
func (st *Stack) UnmarshalJSON(b []byte) error {
	type plain Stack
	var w struct {
		*plain
		CustomerID json.RawMessage `json:"customerId"`
	}
	w.plain = (*plain)(st)
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	st.CustomerID = ""
	switch {
	case len(w.CustomerID) == 0 || string(w.CustomerID) == "null":
		return nil
	case w.CustomerID[0] == '"':
		return json.Unmarshal(w.CustomerID, &st.CustomerID)
	}
	var n json.Number
	if err := json.Unmarshal(w.CustomerID, &n); err != nil {
		return fmt.Errorf("client: customerId %s: %w", w.CustomerID, err)
	}
	st.CustomerID = n.String()
	return nil
}

// StackValidation is the answer to ValidateStack: each code's validation
// and the total of the valid ones.
type StackValidation struct {
	Valid          bool                  `json:"valid"`
	DiscountAmount int64                 `json:"discountAmount"`
	Items          []StackValidationItem `json:"items"`
}

// StackValidationItem is one code's validation, as Validate answers it.
type StackValidationItem struct {
	VoucherCode string `json:"voucherCode"`
	Validation
}

// ReserveStack takes one use of each code for the order, all or none. A
// refusal is the refused code's *Error with FailedCode set, and nothing
// is held for any code. Retries resend the same orderId, so the stack is
// taken at most once.
func (c *Client) ReserveStack(ctx context.Context, r StackRequest) (*Stack, error) {
	var out Stack
	if err := c.call(ctx, http.MethodPost, "/reservations", r, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// ValidateStack answers what ReserveStack would give now, per code and in
// total, taking nothing.
func (c *Client) ValidateStack(ctx context.Context, r StackRequest) (*StackValidation, error) {
	var out StackValidation
	in := r
	body := struct {
		CustomerID  string   `json:"customerId"`
		OrderAmount int64    `json:"orderAmount"`
		Codes       []string `json:"codes"`
		Currency    string   `json:"currency,omitempty"`
	}{in.CustomerID, in.OrderAmount, in.Codes, in.Currency}
	if err := c.call(ctx, http.MethodPost, "/validation", body, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetStack returns the order of several codes orderID.
func (c *Client) GetStack(ctx context.Context, orderID string) (*Stack, error) {
	return c.stackCall(ctx, http.MethodGet, orderID, "", nil)
}

// ConfirmStack confirms every code of the order, all or none; idempotent.
func (c *Client) ConfirmStack(ctx context.Context, orderID string) (*Stack, error) {
	return c.stackCall(ctx, http.MethodPost, orderID, "/confirm", nil)
}

// ReleaseStack gives back every code of the order at once; idempotent.
func (c *Client) ReleaseStack(ctx context.Context, orderID string) (*Stack, error) {
	return c.stackCall(ctx, http.MethodDelete, orderID, "", nil)
}

// ExtendStack pushes every code's expiry seconds further, all or none, as
// Extend does for one code.
func (c *Client) ExtendStack(ctx context.Context, orderID string, seconds int) (*Stack, error) {
	in := struct {
		Seconds int `json:"seconds"`
	}{seconds}
	return c.stackCall(ctx, http.MethodPost, orderID, "/extend", in)
}

func (c *Client) stackCall(ctx context.Context, method, orderID, suffix string, in any) (*Stack, error) {
	var out Stack
	if err := c.call(ctx, method, "/reservations/"+url.PathEscape(orderID)+suffix, in, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}
