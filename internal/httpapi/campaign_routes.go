package httpapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// campaignRoutes registers the campaign routes; all need an admin key.
// Reservations with a campaign code use the voucher routes.
func (s *Server) campaignRoutes() {
	for _, r := range []struct {
		route string
		h     HandlerFunc
	}{
		{"POST /campaigns", s.createCampaign},
		{"GET /campaigns/{id}", s.getCampaign},
		{"GET /campaigns/{id}/codes", s.campaignCodes},
		{"POST /campaigns/{id}/codes", s.addCampaignCodes},
	} {
		s.mux.Handle(r.route, s.wrap(r.route, true, r.h))
	}
}

// campaignJSON is a campaign with its budget's live counts.
type campaignJSON struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	CodePrefix string `json:"codePrefix"`
	CodeLength int    `json:"codeLength"`
	CodeCount  int32  `json:"codeCount"`
	// One of DiscountAmount and DiscountPercent is set, as for a voucher.
	DiscountAmount    int64       `json:"discountAmount,omitempty"`
	DiscountPercent   json.Number `json:"discountPercent,omitempty"`
	MaxDiscountAmount int64       `json:"maxDiscountAmount,omitempty"`
	MinOrderAmount    int64       `json:"minOrderAmount"`
	TotalLimit        int32       `json:"totalLimit"`
	PerUserLimit      int32       `json:"perUserLimit"`
	StartsAt          time.Time   `json:"startsAt"`
	EndsAt            time.Time   `json:"endsAt"`
	FlashSale         bool        `json:"flashSale"`
	Active            bool        `json:"active"`
	Reserved          int32       `json:"reserved"`
	Confirmed         int32       `json:"confirmed"`
	Remaining         int32       `json:"remaining"`
	CreatedAt         time.Time   `json:"createdAt"`
	// The money budget across all codes, when the campaign has one.
	BudgetAmount    int64  `json:"budgetAmount,omitempty"`
	BudgetShortfall string `json:"budgetShortfall,omitempty"`
	BudgetReserved  *int64 `json:"budgetReserved,omitempty"`
	BudgetConfirmed *int64 `json:"budgetConfirmed,omitempty"`
	BudgetRemaining *int64 `json:"budgetRemaining,omitempty"`

	// Currency is left out when the campaign has none.
	Currency string `json:"currency,omitempty"`

	// The recurring windows and quota per window across all codes, as a
	// voucher's; CurrentWindow and NextWindowAt with GET only.
	Schedule      *voucher.Schedule  `json:"schedule,omitempty"`
	WindowLimit   int32              `json:"windowLimit,omitempty"`
	CurrentWindow *currentWindowJSON `json:"currentWindow,omitempty"`
	NextWindowAt  *time.Time         `json:"nextWindowAt,omitempty"`
}

func toCampaignJSON(c voucher.Campaign) campaignJSON {
	v := toVoucherJSON(c.Budget)
	return campaignJSON{
		ID: c.ID, Name: c.Name, CodePrefix: c.CodePrefix, CodeLength: c.CodeLength, CodeCount: c.CodeCount,
		DiscountAmount: v.DiscountAmount, DiscountPercent: v.DiscountPercent, MaxDiscountAmount: v.MaxDiscountAmount,
		MinOrderAmount: v.MinOrderAmount, TotalLimit: v.TotalLimit, PerUserLimit: v.PerUserLimit,
		StartsAt: v.StartsAt, EndsAt: v.EndsAt, FlashSale: v.FlashSale, Active: v.Active, Currency: v.Currency,
		Reserved: v.Reserved, Confirmed: v.Confirmed, Remaining: v.Remaining, CreatedAt: c.CreatedAt.UTC(),
		BudgetAmount: v.BudgetAmount, BudgetShortfall: v.BudgetShortfall, BudgetReserved: v.BudgetReserved,
		BudgetConfirmed: v.BudgetConfirmed, BudgetRemaining: v.BudgetRemaining,
		Schedule: v.Schedule, WindowLimit: v.WindowLimit,
	}
}

// campaignFields are the members of POST /campaigns: the campaign's own,
// then its budget's, which are decoded as the same members of POST /vouchers.
var campaignFields = []string{"name", "codeCount", "codePrefix", "codeLength",
	"discountAmount", "minOrderAmount", "totalLimit", "perUserLimit", "startsAt", "endsAt",
	"discountPercent", "maxDiscountAmount", "flashSale", "currency", "budgetAmount", "budgetShortfall",
	"schedule", "windowLimit"}

// createCampaignRequest is the body of POST /campaigns.
type createCampaignRequest struct {
	Name       *string
	CodeCount  int
	CodePrefix string
	CodeLength int
	// budget holds the voucher members, decoded as POST /vouchers does.
	budget createVoucherRequest
}

func (r *createCampaignRequest) decode(body []byte) error {
	_, err := decodeObject(body, campaignFields, func(i int, v jsonValue) error {
		name := campaignFields[i]
		var err error
		switch name {
		case "name":
			var s string
			s, err = stringField(name, v)
			r.Name = &s
		case "codePrefix":
			r.CodePrefix, err = stringField(name, v)
		case "codeCount":
			var n int64
			n, err = intField(name, v, 0, voucher.MaxCodesPerRequest)
			r.CodeCount = int(n)
		case "codeLength":
			var n int64
			n, err = intField(name, v, voucher.MinCodeLength, voucher.MaxCodeLength)
			r.CodeLength = int(n)
		default:
			// A budget member: the voucher body's decoder reads it.
			one := make([]byte, 0, len(name)+len(v.raw)+5)
			one = append(append(append(append(append(one, `{"`...), name...), `":`...), v.raw...), '}')
			err = r.budget.decode(one, false)
		}
		return err
	})
	return err
}

func (r createCampaignRequest) toNewCampaign() (voucher.NewCampaign, error) {
	if r.Name == nil {
		return voucher.NewCampaign{}, voucher.Errorf(voucher.CodeInvalidRequest, "name is required")
	}
	// The budget's code is the campaign id, chosen by the service.
	placeholder := "campaign"
	r.budget.Code = &placeholder
	b, err := r.budget.toVoucher()
	if err != nil {
		return voucher.NewCampaign{}, err
	}
	b.Code = ""
	return voucher.NewCampaign{Name: *r.Name, CodePrefix: r.CodePrefix, CodeLength: r.CodeLength,
		CodeCount: r.CodeCount, Budget: b}, nil
}

func (s *Server) createCampaign(w http.ResponseWriter, r *http.Request) error {
	var body createCampaignRequest
	if err := decodeBody(r, body.decode); err != nil {
		return err
	}
	n, err := body.toNewCampaign()
	if err != nil {
		return err
	}
	c, err := s.svc.CreateCampaign(r.Context(), n)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/campaigns/"+c.ID)
	writeJSON(w, http.StatusCreated, toCampaignJSON(c))
	return nil
}

func (s *Server) getCampaign(w http.ResponseWriter, r *http.Request) error {
	c, err := s.svc.Campaign(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	out := toCampaignJSON(c)
	var v voucherJSON
	v.withWindows(c.Budget, s.svc.Config().Clock())
	out.CurrentWindow, out.NextWindowAt = v.CurrentWindow, v.NextWindowAt
	writeJSON(w, http.StatusOK, out)
	return nil
}

var addCodesFields = []string{"count", "codes"}

// addCampaignCodes generates count codes (201, the campaign), or imports
// the shop's own codes (200, importJSON): exactly one of the members.
func (s *Server) addCampaignCodes(w http.ResponseWriter, r *http.Request) error {
	count := -1
	var codes []voucher.ImportCode
	if err := decodeBodyUpTo(r, MaxImportBodyBytes, func(b []byte) error {
		seen, err := decodeObject(b, addCodesFields, func(i int, v jsonValue) error {
			if i == 1 {
				var err error
				codes, err = decodeImportCodes(v)
				return err
			}
			n, err := intField("count", v, 1, voucher.MaxCodesPerRequest)
			count = int(n)
			return err
		})
		if seen == 3 {
			return voucher.Errorf(voucher.CodeInvalidRequest, "count and codes exclude each other: give one")
		}
		return err
	}); err != nil {
		return err
	}
	if codes != nil {
		res, err := s.svc.ImportCampaignCodes(r.Context(), r.PathValue("id"), codes)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toImportJSON(res))
		return nil
	}
	if count < 0 {
		return voucher.Errorf(voucher.CodeInvalidRequest, "count or codes is required")
	}
	c, err := s.svc.AddCampaignCodes(r.Context(), r.PathValue("id"), count)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toCampaignJSON(c))
	return nil
}

// campaignCodeJSON is one code of GET /campaigns/{id}/codes.
type campaignCodeJSON struct {
	Code string `json:"code"`
	Used bool   `json:"used"`
	// CustomerID is left out for a code that serves every customer.
	CustomerID string `json:"customerId,omitempty"`
}

// campaignCodePageJSON is a page of GET /campaigns/{id}/codes.
type campaignCodePageJSON struct {
	Codes []campaignCodeJSON `json:"codes"`
	Next  string             `json:"next"`
}

// campaignCodes answers a keyset page of codes as JSON or, when the client
// accepts text/csv, every code as a CSV stream (code,used), flushed as it
// is read, page after page.
func (s *Server) campaignCodes(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if acceptsCSV(r.Header.Get("Accept")) {
		if _, err := query(r); err != nil {
			return err
		}
		return s.campaignCodesCSV(w, r, id)
	}
	q, err := query(r, "limit", "after")
	if err != nil {
		return err
	}
	p, err := pageOf(q)
	if err != nil {
		return err
	}
	page, err := s.svc.CampaignCodes(r.Context(), id, p)
	if err != nil {
		return err
	}
	out := campaignCodePageJSON{Codes: make([]campaignCodeJSON, len(page.Codes)), Next: page.Next}
	for i, c := range page.Codes {
		out.Codes[i] = campaignCodeJSON{Code: c.Code, Used: c.Used, CustomerID: c.CustomerID}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// acceptsCSV reports whether an Accept header asks for text/csv.
func acceptsCSV(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		media, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(media), "text/csv") {
			return true
		}
	}
	return false
}

func (s *Server) campaignCodesCSV(w http.ResponseWriter, r *http.Request, id string) error {
	c, err := s.svc.Campaign(r.Context(), id)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+c.ID+`-codes.csv"`)
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.WriteString("code,used\n")
	rc := http.NewResponseController(w)
	n := 0
	err = s.svc.EachCampaignCode(r.Context(), id, func(c voucher.CampaignCode) error {
		// Codes are of [A-Za-z0-9_-]: no CSV quoting is needed.
		_, _ = bw.WriteString(c.Code)
		if c.Used {
			_, _ = bw.WriteString(",true\n")
		} else {
			_, _ = bw.WriteString(",false\n")
		}
		if n++; n%5000 == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
			_ = rc.Flush()
		}
		return nil
	})
	if err != nil {
		// The status is sent: cut the stream short so that the client sees
		// a broken transfer, not a shorter list.
		s.log.ErrorContext(r.Context(), "campaign codes export cut short", "campaign", id, "codes", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	return bw.Flush()
}
