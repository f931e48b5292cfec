package bench

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

const (
	fakeAPIToken   = "api-token"
	fakeAdminToken = "admin-token"
)

// fakeAPI is a small in-memory voucherd: create voucher, reserve (idempotent
// by orderId, total and per-user limits) and healthz, behind one mutex.
type fakeAPI struct {
	mu       sync.Mutex
	vouchers map[string]*fakeVoucher
	reserves atomic.Int64
	// dropEvery, when > 0, makes every dropEvery-th reserve call take the use
	// and then close the connection without answering (a lost answer).
	dropEvery int64
	// unknownEvery, when > 0, makes every unknownEvery-th reserve call take
	// the use and answer 503 with outcomeUnknown (a Kafka produce timeout).
	unknownEvery int64
	// slowFirst, when > 0, makes the first slowFirst reserve calls wait
	// slowFor before answering (a cold server).
	slowFirst int64
	slowFor   time.Duration
}

type fakeVoucher struct {
	totalLimit   int32
	perUserLimit int32
	flashSale    bool
	discount     int64
	orders       map[string]string // orderId -> customerId
	perCustomer  map[string]int32
}

func newFakeServer(t *testing.T) (*fakeAPI, *httptest.Server) {
	t.Helper()
	f := &fakeAPI{vouchers: map[string]*fakeVoucher{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("POST /vouchers", f.create)
	mux.HandleFunc("POST /vouchers/{code}/reservations", f.reserve)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv
}

func fakeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}

func (f *fakeAPI) create(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+fakeAdminToken {
		fakeErr(w, http.StatusForbidden, "FORBIDDEN", "admin token required")
		return
	}
	var v struct {
		Code           string    `json:"code"`
		DiscountAmount int64     `json:"discountAmount"`
		TotalLimit     int32     `json:"totalLimit"`
		PerUserLimit   int32     `json:"perUserLimit"`
		StartsAt       time.Time `json:"startsAt"`
		EndsAt         time.Time `json:"endsAt"`
		FlashSale      bool      `json:"flashSale"`
	}
	if err := json.NewDecoder(r.Body).Decode(&v); err != nil || v.TotalLimit <= 0 || !v.StartsAt.Before(v.EndsAt) {
		fakeErr(w, http.StatusBadRequest, "INVALID_REQUEST", "bad voucher")
		return
	}
	if v.PerUserLimit == 0 {
		v.PerUserLimit = 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.vouchers[v.Code]; ok {
		fakeErr(w, http.StatusConflict, "VOUCHER_EXISTS", "exists")
		return
	}
	f.vouchers[v.Code] = &fakeVoucher{
		totalLimit: v.TotalLimit, perUserLimit: v.PerUserLimit, flashSale: v.FlashSale, discount: v.DiscountAmount,
		orders: map[string]string{}, perCustomer: map[string]int32{},
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeAPI) reserve(w http.ResponseWriter, r *http.Request) {
	n := f.reserves.Add(1)
	if n <= f.slowFirst {
		time.Sleep(f.slowFor)
	}
	if r.Header.Get("Authorization") != "Bearer "+fakeAPIToken {
		fakeErr(w, http.StatusUnauthorized, "UNAUTHORIZED", "token required")
		return
	}
	var req struct {
		CustomerID  json.RawMessage `json:"customerId"`
		OrderID     string          `json:"orderId"`
		OrderAmount int64           `json:"orderAmount"`
	}
	err := json.NewDecoder(r.Body).Decode(&req)
	var customer string
	if err == nil {
		customer, err = voucher.ParseCustomerIDJSON(req.CustomerID)
	}
	if err != nil || req.OrderID == "" {
		fakeErr(w, http.StatusBadRequest, "INVALID_REQUEST", "bad request")
		return
	}
	status, code := f.take(r.PathValue("code"), customer, req.OrderID)
	if f.dropEvery > 0 && n%f.dropEvery == 0 {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	if f.unknownEvery > 0 && n%f.unknownEvery == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"UNAVAILABLE","message":"not acknowledged in time","outcomeUnknown":true}`))
		return
	}
	if status != http.StatusCreated {
		fakeErr(w, status, code, code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"orderId": req.OrderID, "discountAmount": 1000, "status": "RESERVED"})
}

func (f *fakeAPI) take(code string, customer string, orderID string) (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.vouchers[code]
	if !ok {
		return http.StatusNotFound, "VOUCHER_NOT_FOUND"
	}
	if c, ok := v.orders[orderID]; ok {
		if c != customer {
			return http.StatusConflict, "ORDER_CONFLICT"
		}
		return http.StatusCreated, ""
	}
	if int32(len(v.orders)) >= v.totalLimit {
		return http.StatusConflict, "OUT_OF_STOCK"
	}
	if v.perCustomer[customer] >= v.perUserLimit {
		return http.StatusConflict, "ALREADY_USED"
	}
	v.orders[orderID] = customer
	v.perCustomer[customer]++
	return http.StatusCreated, ""
}

// snapshot copies the fake's state for one voucher.
func (f *fakeAPI) snapshot(code string) (fakeVoucher, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.vouchers[code]
	if !ok {
		return fakeVoucher{}, false
	}
	cp := *v
	cp.orders = map[string]string{}
	for k, c := range v.orders {
		cp.orders[k] = c
	}
	cp.perCustomer = map[string]int32{}
	for k, c := range v.perCustomer {
		cp.perCustomer[k] = c
	}
	return cp, true
}
