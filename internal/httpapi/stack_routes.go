package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// stackRoutes registers the routes of orders presenting several codes
// (docs/stacks.md); the same keys as the per-code reservation routes.
func (s *Server) stackRoutes() {
	for _, r := range []struct {
		route string
		h     HandlerFunc
	}{
		{"POST /reservations", s.reserveStack},
		{"POST /validation", s.validateStack},
		{"GET /reservations/{orderId}", s.getStack},
		{"DELETE /reservations/{orderId}", s.releaseStack},
		{"POST /reservations/{orderId}/confirm", s.confirmStack},
		{"POST /reservations/{orderId}/extend", s.extendStack},
	} {
		s.mux.Handle(r.route, s.wrap(r.route, false, r.h))
	}
}

// stackRequest is the body of POST /reservations.
type stackRequest struct {
	CustomerID  string
	OrderID     string
	OrderAmount int64
	Currency    string
	Codes       []string
	// ReplacesOrderID is a member of POST /reservations only.
	ReplacesOrderID string
	seen            uint64
}

// stackFields are the members of stackRequest; the first four are
// required.
var stackFields = []string{"customerId", "orderId", "orderAmount", "codes", "currency", "replacesOrderId"}

func (r *stackRequest) decode(body []byte) error {
	seen, err := decodeObject(body, stackFields, func(i int, v jsonValue) error {
		var err error
		switch i {
		case 0:
			r.CustomerID, err = customerField("customerId", v)
		case 1:
			r.OrderID, err = stringField("orderId", v)
		case 2:
			r.OrderAmount, err = intField("orderAmount", v, 0, maxAmount)
		case 3:
			r.Codes, err = codesField("codes", v)
		case 4:
			r.Currency, err = stringField("currency", v)
			if err == nil && !voucher.ValidCurrency(r.Currency) {
				err = voucher.Errorf(voucher.CodeInvalidRequest, "currency must be an ISO 4217 code: three letters A-Z")
			}
		case 5:
			r.ReplacesOrderID, err = stringField("replacesOrderId", v)
			if err == nil && r.ReplacesOrderID == "" {
				err = voucher.Errorf(voucher.CodeInvalidRequest, "replacesOrderId must not be empty")
			}
		}
		return err
	})
	r.seen = seen
	return err
}

// codesField reads an array of strings.
func codesField(name string, v jsonValue) ([]string, error) {
	var codes []string
	if v.kind != kindArray || json.Unmarshal(v.raw, &codes) != nil {
		return nil, voucher.Errorf(voucher.CodeInvalidRequest, "%s must be an array of codes", name)
	}
	return codes, nil
}

func (r stackRequest) toDomain() (voucher.StackRequest, error) {
	for i, name := range stackFields[:4] {
		if r.seen&(1<<i) == 0 {
			return voucher.StackRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "%s is required", name)
		}
	}
	req := voucher.StackRequest{CustomerID: r.CustomerID, OrderID: r.OrderID, OrderAmount: r.OrderAmount,
		Currency: r.Currency, Codes: r.Codes, ReplacesOrderID: r.ReplacesOrderID}
	return req, req.Validate()
}

// stackJSON is an order presenting several codes on the wire.
type stackJSON struct {
	OrderID        string          `json:"orderId"`
	CustomerID     *customerJSON   `json:"customerId,omitempty"`
	OrderAmount    *int64          `json:"orderAmount,omitempty"`
	Status         string          `json:"status"`
	ExpiresAt      time.Time       `json:"expiresAt"`
	DiscountAmount int64           `json:"discountAmount"`
	Items          []stackItemJSON `json:"items"`
}

// stackItemJSON is one code of a stack.
type stackItemJSON struct {
	Code           string `json:"code"`
	DiscountAmount int64  `json:"discountAmount"`
	// Status is set in the answers about an existing stack.
	Status string `json:"status,omitempty"`
}

// toStackJSON is st on the wire; full adds the order's customer and
// amount and each item's status (the reads and changes of an existing
// stack).
func toStackJSON(st voucher.Stack, full bool) stackJSON {
	out := stackJSON{OrderID: st.OrderID, Status: string(st.Status()), ExpiresAt: st.ExpiresAt().UTC(),
		DiscountAmount: st.DiscountAmount(), Items: make([]stackItemJSON, len(st.Items))}
	for i, it := range st.Items {
		out.Items[i] = stackItemJSON{Code: it.Code, DiscountAmount: it.Redemption.DiscountAmount}
		if full {
			out.Items[i].Status = string(it.Redemption.Status)
		}
	}
	if full {
		c, amount := customerJSON(st.CustomerID), st.OrderAmount
		out.CustomerID, out.OrderAmount = &c, &amount
	}
	return out
}

func (s *Server) reserveStack(w http.ResponseWriter, r *http.Request) error {
	var body stackRequest
	if err := decodeBody(r, body.decode); err != nil {
		return err
	}
	req, err := body.toDomain()
	if err != nil {
		return err
	}
	req.Requester = requester(w)
	st, err := s.svc.ReserveStack(r.Context(), req)
	if err != nil {
		return err
	}
	if st.Replay {
		w.Header()["Idempotent-Replayed"] = replayedTrue
	}
	writeJSON(w, http.StatusCreated, toStackJSON(st, false))
	return nil
}

func (s *Server) getStack(w http.ResponseWriter, r *http.Request) error {
	st, err := s.svc.Stack(r.Context(), r.PathValue("orderId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toStackJSON(st, true))
	return nil
}

func (s *Server) releaseStack(w http.ResponseWriter, r *http.Request) error {
	st, err := s.svc.ReleaseStack(r.Context(), r.PathValue("orderId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toStackJSON(st, true))
	return nil
}

func (s *Server) confirmStack(w http.ResponseWriter, r *http.Request) error {
	st, err := s.svc.ConfirmStack(r.Context(), r.PathValue("orderId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toStackJSON(st, true))
	return nil
}

func (s *Server) extendStack(w http.ResponseWriter, r *http.Request) error {
	var body extendRequest
	if err := decodeBody(r, body.decode); err != nil {
		return err
	}
	d, err := body.duration()
	if err != nil {
		return err
	}
	st, err := s.svc.ExtendStack(r.Context(), r.PathValue("orderId"), d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toStackJSON(st, true))
	return nil
}

// stackingField reads a voucher's stacking member:
// {"stackable": bool, "exclusiveGroup"?: string}.
func stackingField(name string, v jsonValue) (*voucher.Stacking, error) {
	if v.kind != kindObject {
		return nil, voucher.Errorf(voucher.CodeInvalidRequest, "%s must be an object", name)
	}
	var st voucher.Stacking
	seen, err := decodeObject(v.raw, []string{"stackable", "exclusiveGroup"}, func(i int, m jsonValue) error {
		var err error
		if i == 0 {
			st.Stackable, err = boolField(name+".stackable", m)
		} else {
			st.ExclusiveGroup, err = stringField(name+".exclusiveGroup", m)
			if err == nil && st.ExclusiveGroup == "" {
				err = voucher.Errorf(voucher.CodeInvalidRequest, "%s.exclusiveGroup must not be empty", name)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if seen&1 == 0 {
		return nil, voucher.Errorf(voucher.CodeInvalidRequest, "%s.stackable is required", name)
	}
	return &st, st.Validate()
}

// withStacking adds v's stacking setting to out.
func withStacking(out voucherJSON, v voucher.Voucher) voucherJSON {
	out.Stacking = &stackingJSON{Stackable: v.Stacking.Stackable, ExclusiveGroup: v.Stacking.ExclusiveGroup}
	return out
}

// toStackValidation returns the body of POST /validation: customerId,
// orderAmount and codes are required; orderId is not a member.
func (r stackRequest) toStackValidation() (voucher.StackRequest, error) {
	for _, i := range []int{0, 2, 3} {
		if r.seen&(1<<i) == 0 {
			return voucher.StackRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "%s is required", stackFields[i])
		}
	}
	if r.seen&(1<<1) != 0 || r.seen&(1<<5) != 0 {
		return voucher.StackRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "orderId and replacesOrderId are not members of a validation of several codes")
	}
	return voucher.StackRequest{CustomerID: r.CustomerID, OrderAmount: r.OrderAmount, Currency: r.Currency, Codes: r.Codes}, nil
}

// stackValidationJSON is the answer of POST /validation.
type stackValidationJSON struct {
	Valid          bool                      `json:"valid"`
	DiscountAmount int64                     `json:"discountAmount"`
	Items          []stackValidationItemJSON `json:"items"`
}

// stackValidationItemJSON is one code's validation: the members of the
// per-code validation's answer, with the code as voucherCode.
type stackValidationItemJSON struct {
	VoucherCode string `json:"voucherCode"`
	validationJSON
}

// validateStack answers what POST /reservations of the codes would give
// now, per code and in total, taking nothing.
func (s *Server) validateStack(w http.ResponseWriter, r *http.Request) error {
	var body stackRequest
	if err := decodeBody(r, body.decode); err != nil {
		return err
	}
	req, err := body.toStackValidation()
	if err != nil {
		return err
	}
	req.Requester = requester(w)
	v, err := s.svc.ValidateStack(r.Context(), req)
	if err != nil {
		return err
	}
	out := stackValidationJSON{Valid: v.Valid(), DiscountAmount: v.DiscountAmount(), Items: make([]stackValidationItemJSON, len(v.Items))}
	for i, it := range v.Items {
		out.Items[i] = stackValidationItemJSON{VoucherCode: it.Code, validationJSON: toValidationJSON(it.Validation)}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
