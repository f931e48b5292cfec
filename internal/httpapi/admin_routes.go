package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// adminRoutes registers the listings and the audit trail; all need an admin
// key.
func (s *Server) adminRoutes() {
	for _, r := range []struct {
		route string
		h     HandlerFunc
	}{
		{"GET /vouchers", s.listVouchers},
		{"GET /vouchers/{code}/reservations", s.listReservations},
		{"GET /customers/{customerId}/redemptions", s.customerRedemptions},
		{"GET /vouchers/{code}/audit", s.audit},
	} {
		s.mux.Handle(r.route, s.wrap(r.route, true, r.h))
	}
}

// query reads the query string of a listing strictly: a parameter not in
// allowed, or given twice, is INVALID_REQUEST.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, voucher.Errorf(voucher.CodeInvalidRequest, "malformed query string")
	}
	for name, vals := range q {
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		switch {
		case !known:
			return nil, voucher.Errorf(voucher.CodeInvalidRequest, "unknown query parameter %s", name)
		case len(vals) > 1:
			return nil, voucher.Errorf(voucher.CodeInvalidRequest, "query parameter %s is given more than once", name)
		}
	}
	return q, nil
}

// pageOf reads limit and after.
func pageOf(q url.Values) (voucher.PageRequest, error) {
	p := voucher.PageRequest{After: q.Get("after")}
	if q.Has("limit") {
		n, ok := queryInteger(q.Get("limit"))
		if !ok || n < 1 || n > voucher.MaxPageLimit {
			return p, voucher.Errorf(voucher.CodeInvalidRequest, "limit must be an integer between 1 and %d", voucher.MaxPageLimit)
		}
		p.Limit = int(n)
	}
	return p, nil
}

// customerParam reads a customerId of a path or query: the string as
// written ("42" is the customer a JSON 42 names).
func customerParam(s string) (string, error) {
	if !voucher.ValidCustomerID(s) {
		return "", voucher.Errorf(voucher.CodeInvalidRequest, "customerId must be 1-64 characters of A-Z a-z 0-9 . _ : - @ +")
	}
	return s, nil
}

// voucherPageJSON is a page of GET /vouchers.
type voucherPageJSON struct {
	Vouchers []voucherJSON `json:"vouchers"`
	Next     string        `json:"next"`
}

func (s *Server) listVouchers(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "state", "flashSale", "codePrefix", "limit", "after")
	if err != nil {
		return err
	}
	p, err := pageOf(q)
	if err != nil {
		return err
	}
	f := voucher.VoucherFilter{State: voucher.VoucherState(q.Get("state")), CodePrefix: q.Get("codePrefix"),
		Limit: p.Limit, After: p.After}
	if q.Has("flashSale") {
		fs := q.Get("flashSale")
		b, err := strconv.ParseBool(fs)
		if err != nil || (fs != "true" && fs != "false") {
			return voucher.Errorf(voucher.CodeInvalidRequest, "flashSale must be true or false")
		}
		f.FlashSale = &b
	}
	if q.Has("codePrefix") && f.CodePrefix == "" {
		return voucher.Errorf(voucher.CodeInvalidRequest, "codePrefix must not be empty")
	}
	if q.Has("state") && f.State == "" {
		return voucher.Errorf(voucher.CodeInvalidRequest, "state must be active, scheduled, ended or disabled")
	}
	page, err := s.svc.ListVouchers(r.Context(), f)
	if err != nil {
		return err
	}
	out := voucherPageJSON{Vouchers: make([]voucherJSON, 0, len(page.Vouchers)), Next: page.Next}
	for _, v := range page.Vouchers {
		out.Vouchers = append(out.Vouchers, toVoucherJSON(v))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// reservationPageJSON is a page of GET /vouchers/{code}/reservations.
type reservationPageJSON struct {
	Reservations []redemptionJSON `json:"reservations"`
	Next         string           `json:"next"`
}

func (s *Server) listReservations(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "status", "customerId", "limit", "after")
	if err != nil {
		return err
	}
	p, err := pageOf(q)
	if err != nil {
		return err
	}
	f := voucher.RedemptionFilter{Code: r.PathValue("code"), Status: voucher.Status(q.Get("status")),
		Limit: p.Limit, After: p.After}
	if q.Has("status") && f.Status == "" {
		return voucher.Errorf(voucher.CodeInvalidRequest, "status must be RESERVED, CONFIRMED or RELEASED")
	}
	if q.Has("customerId") {
		if f.CustomerID, err = customerParam(q.Get("customerId")); err != nil {
			return err
		}
	}
	page, err := s.svc.ListReservations(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, reservationPageJSON{Reservations: redemptionsJSON(page.Redemptions), Next: page.Next})
	return nil
}

// redemptionPageJSON is a page of GET /customers/{customerId}/redemptions.
type redemptionPageJSON struct {
	Redemptions []redemptionJSON `json:"redemptions"`
	Next        string           `json:"next"`
}

func (s *Server) customerRedemptions(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "limit", "after")
	if err != nil {
		return err
	}
	p, err := pageOf(q)
	if err != nil {
		return err
	}
	customer, err := customerParam(r.PathValue("customerId"))
	if err != nil {
		return err
	}
	page, err := s.svc.CustomerRedemptions(r.Context(), customer, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, redemptionPageJSON{Redemptions: redemptionsJSON(page.Redemptions), Next: page.Next})
	return nil
}

func redemptionsJSON(list []voucher.Redemption) []redemptionJSON {
	out := make([]redemptionJSON, 0, len(list))
	for _, r := range list {
		out = append(out, toRedemptionJSON(r))
	}
	return out
}

// auditEntryJSON is one entry of the audit trail.
type auditEntryJSON struct {
	ID      int64           `json:"id"`
	Code    string          `json:"code"`
	Action  string          `json:"action"`
	KeyName string          `json:"keyName"`
	At      time.Time       `json:"at"`
	Before  json.RawMessage `json:"before"`
	After   json.RawMessage `json:"after"`
}

// auditPageJSON is a page of GET /vouchers/{code}/audit.
type auditPageJSON struct {
	Entries []auditEntryJSON `json:"entries"`
	Next    string           `json:"next"`
}

func (s *Server) audit(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "limit", "after")
	if err != nil {
		return err
	}
	p, err := pageOf(q)
	if err != nil {
		return err
	}
	page, err := s.svc.Audit(r.Context(), r.PathValue("code"), p)
	if err != nil {
		return err
	}
	out := auditPageJSON{Entries: make([]auditEntryJSON, 0, len(page.Entries)), Next: page.Next}
	null := json.RawMessage("null")
	for _, e := range page.Entries {
		je := auditEntryJSON{ID: e.ID, Code: e.Code, Action: string(e.Action), KeyName: e.KeyName,
			At: e.At.UTC(), Before: e.Before, After: e.After}
		if je.Before == nil {
			je.Before = null
		}
		if je.After == nil {
			je.After = null
		}
		out.Entries = append(out.Entries, je)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
