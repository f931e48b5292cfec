package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// MaxCodesPerRequest is the most codes one CreateCampaign or
// AddCampaignCodes call generates; larger campaigns add codes in several
// calls (CreateCampaignCodes does).
const MaxCodesPerRequest = 100_000

// Campaign is a campaign of unique single-use codes sharing one budget: a
// reservation with any of its codes (Reserve, as with a voucher's code)
// takes a use of TotalLimit, counts against PerUserLimit across all the
// codes, and holds that code until released (a second order on a held code
// fails with AlreadyUsed, reason ReasonCodeUsed). Reserved, Confirmed and
// Remaining are live counts across the codes.
type Campaign struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	CodePrefix string `json:"codePrefix"`
	CodeLength int    `json:"codeLength"`
	CodeCount  int32  `json:"codeCount"`
	// One of DiscountAmount and DiscountPercent is set, as for a Voucher.
	DiscountAmount    int64     `json:"discountAmount,omitempty"`
	DiscountPercent   float64   `json:"discountPercent,omitempty"`
	MaxDiscountAmount int64     `json:"maxDiscountAmount,omitempty"`
	MinOrderAmount    int64     `json:"minOrderAmount"`
	TotalLimit        int32     `json:"totalLimit"`
	PerUserLimit      int32     `json:"perUserLimit"`
	StartsAt          time.Time `json:"startsAt"`
	EndsAt            time.Time `json:"endsAt"`
	FlashSale         bool      `json:"flashSale"`
	Active            bool      `json:"active"`
	Reserved          int32     `json:"reserved"`
	Confirmed         int32     `json:"confirmed"`
	Remaining         int32     `json:"remaining"`
	CreatedAt         time.Time `json:"createdAt"`
	// Currency is the campaign's currency, as a Voucher's; empty: any.
	Currency string `json:"currency,omitempty"`
	// The money budget across all codes, as a Voucher's (0: none).
	BudgetAmount    int64  `json:"budgetAmount,omitempty"`
	BudgetShortfall string `json:"budgetShortfall,omitempty"`
	BudgetReserved  int64  `json:"budgetReserved,omitempty"`
	BudgetConfirmed int64  `json:"budgetConfirmed,omitempty"`
	BudgetRemaining int64  `json:"budgetRemaining,omitempty"`
}

// NewCampaign is a campaign to create. Zero CodeLength and PerUserLimit
// take the server's defaults (10 and 1). The discount is DiscountAmount or
// DiscountPercent (with an optional MaxDiscountAmount), as for a Voucher.
type NewCampaign struct {
	Name              string    `json:"name"`
	CodeCount         int       `json:"codeCount"`
	CodePrefix        string    `json:"codePrefix,omitempty"`
	CodeLength        int       `json:"codeLength,omitempty"`
	DiscountAmount    int64     `json:"discountAmount,omitempty"`
	DiscountPercent   float64   `json:"discountPercent,omitempty"`
	MaxDiscountAmount int64     `json:"maxDiscountAmount,omitempty"`
	MinOrderAmount    int64     `json:"minOrderAmount"`
	TotalLimit        int32     `json:"totalLimit"`
	PerUserLimit      int32     `json:"perUserLimit,omitempty"`
	StartsAt          time.Time `json:"startsAt"`
	EndsAt            time.Time `json:"endsAt"`
	// FlashSale gates the codes' reservations in Redis, as a flash
	// voucher's.
	FlashSale bool `json:"flashSale,omitempty"`
	// Currency binds every code to one currency, as a Voucher's Currency.
	Currency string `json:"currency,omitempty"`
	// BudgetAmount and BudgetShortfall are the campaign's money budget
	// across all its codes, as a Voucher's.
	BudgetAmount    int64  `json:"budgetAmount,omitempty"`
	BudgetShortfall string `json:"budgetShortfall,omitempty"`
}

// CampaignCode is one code of a campaign; Used while a RESERVED or
// CONFIRMED reservation holds it.
type CampaignCode struct {
	Code string `json:"code"`
	Used bool   `json:"used"`
	// CustomerID is the one customer the code serves (an imported code's);
	// empty for every customer.
	CustomerID string `json:"customerId,omitempty"`
}

// CampaignCodePage is one page of a campaign's codes in byte order; an
// empty Next means the last page.
type CampaignCodePage struct {
	Codes []CampaignCode `json:"codes"`
	Next  string         `json:"next"`
}

// CreateCampaign creates a campaign with its first n.CodeCount codes (at
// most MaxCodesPerRequest) (admin token). It is not retried: a retry after a
// lost answer would create a second campaign.
func (c *Client) CreateCampaign(ctx context.Context, n NewCampaign) (*Campaign, error) {
	var out Campaign
	if err := c.call(ctx, http.MethodPost, "/campaigns", n, &out, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// AddCampaignCodes generates count more codes (at most MaxCodesPerRequest)
// for a campaign (admin token). It is not retried: a retry after a lost
// answer would add the codes twice.
func (c *Client) AddCampaignCodes(ctx context.Context, id string, count int) (*Campaign, error) {
	var out Campaign
	body := struct {
		Count int `json:"count"`
	}{count}
	if err := c.call(ctx, http.MethodPost, "/campaigns/"+url.PathEscape(id)+"/codes", body, &out, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateCampaignCodes creates a campaign with total codes, generated
// MaxCodesPerRequest (or batch, when smaller and positive) at a time;
// progress, when not nil, is called after each batch with the codes made
// so far.
func (c *Client) CreateCampaignCodes(ctx context.Context, n NewCampaign, total, batch int, progress func(made int)) (*Campaign, error) {
	if batch <= 0 || batch > MaxCodesPerRequest {
		batch = MaxCodesPerRequest
	}
	n.CodeCount = min(total, batch)
	camp, err := c.CreateCampaign(ctx, n)
	if err != nil {
		return nil, err
	}
	for made := n.CodeCount; ; {
		if progress != nil {
			progress(made)
		}
		if made >= total {
			return camp, nil
		}
		k := min(total-made, batch)
		if camp, err = c.AddCampaignCodes(ctx, camp.ID, k); err != nil {
			return nil, fmt.Errorf("campaign %s has %d of %d codes: %w", camp.ID, made, total, err)
		}
		made += k
	}
}

// GetCampaign returns a campaign with its live counts (admin token).
func (c *Client) GetCampaign(ctx context.Context, id string) (*Campaign, error) {
	var out Campaign
	if err := c.call(ctx, http.MethodGet, "/campaigns/"+url.PathEscape(id), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// CampaignCodes returns one page of a campaign's codes (admin token).
func (c *Client) CampaignCodes(ctx context.Context, id string, p Page) (*CampaignCodePage, error) {
	var out CampaignCodePage
	if err := c.call(ctx, http.MethodGet, withQuery("/campaigns/"+url.PathEscape(id)+"/codes", p.values()), nil, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExportCampaignCodes copies every code of a campaign to w as CSV
// (code,used, a header line first), streamed by the server (admin token).
// It is not retried: part of the CSV may have been written.
func (c *Client) ExportCampaignCodes(ctx context.Context, id string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/campaigns/"+url.PathEscape(id)+"/codes", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/csv")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &TransportError{Method: http.MethodGet, Path: req.URL.Path, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return &TransportError{Method: http.MethodGet, Path: req.URL.Path, Err: err}
	}
	return nil
}

// MaxImportCodes is the most codes one ImportCampaignCodes call carries.
const MaxImportCodes = 10_000

// ImportCode is one of a shop's own codes to add to a campaign; with a
// CustomerID it serves that customer only (others: NotEligible,
// ReasonCustomerMismatch).
type ImportCode struct {
	Code       string `json:"code"`
	CustomerID string `json:"customerId,omitempty"`
}

// Reasons an imported code is refused, found in ImportRefusal.Reason.
const (
	// ImportDuplicate: the code appears earlier in the same call.
	ImportDuplicate = "DUPLICATE"
	// ImportCodeTaken: the code is another campaign's or a voucher's.
	ImportCodeTaken = "CODE_TAKEN"
	// ImportCustomerDiffers: the code is already the campaign's, bound to
	// another customer (or to none).
	ImportCustomerDiffers = "CUSTOMER_DIFFERS"
)

// ImportRefusal is a code of an import that was not added: its 0-based
// position in the call, the code and the reason.
type ImportRefusal struct {
	Index  int    `json:"index"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// ImportResult is what an import did: codes added, codes the campaign had
// already for the same customer (Existing), the others refused, and the
// campaign after it.
type ImportResult struct {
	Added    int             `json:"added"`
	Existing int             `json:"existing"`
	Refused  []ImportRefusal `json:"refused"`
	Campaign Campaign        `json:"campaign"`
}

// ImportCampaignCodes adds the shop's own codes (1 to MaxImportCodes) to a
// campaign in one transaction (admin token). It is retried like a read: an
// import sent again finds its codes there (Existing) and adds nothing
// twice. A malformed code fails the whole call with InvalidRequest.
func (c *Client) ImportCampaignCodes(ctx context.Context, id string, codes []ImportCode) (*ImportResult, error) {
	var out ImportResult
	body := struct {
		Codes []ImportCode `json:"codes"`
	}{codes}
	if err := c.call(ctx, http.MethodPost, "/campaigns/"+url.PathEscape(id)+"/codes", body, &out, true); err != nil {
		return nil, err
	}
	return &out, nil
}
