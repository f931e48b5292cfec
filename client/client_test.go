package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/client"
)

// fakeReservations is a tiny idempotent reserve endpoint: one use per
// orderId, replays answer the same body.
type fakeReservations struct {
	mu     sync.Mutex
	orders map[string]client.ReserveRequest
	calls  atomic.Int32
	// before runs on each call after the reservation is recorded; it may
	// sabotage the answer and return true to stop the handler.
	before func(n int32, w http.ResponseWriter, r *http.Request) bool
}

func (f *fakeReservations) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.calls.Add(1)
	if r.Header.Get("Authorization") != "Bearer tok" {
		writeErr(w, http.StatusUnauthorized, client.Unauthorized, "", "bad token")
		return
	}
	var req client.ReserveRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, client.InvalidRequest, "", err.Error())
		return
	}
	f.mu.Lock()
	if f.orders == nil {
		f.orders = map[string]client.ReserveRequest{}
	}
	if _, ok := f.orders[req.OrderID]; !ok {
		f.orders[req.OrderID] = req
	}
	f.mu.Unlock()
	if f.before != nil && f.before(n, w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(client.Redemption{OrderID: req.OrderID, DiscountAmount: 100, Status: client.StatusReserved})
}

func (f *fakeReservations) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.orders)
}

func writeErr(w http.ResponseWriter, status int, code, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body := map[string]string{"error": code, "message": msg}
	if reason != "" {
		body["reason"] = reason
	}
	_ = json.NewEncoder(w).Encode(body)
}

func fastClient(url string, opts ...client.Option) *client.Client {
	opts = append([]client.Option{client.WithBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)
	return client.New(url, "tok", opts...)
}

func TestReserveRetriesThroughBrokenConnection(t *testing.T) {
	t.Parallel()
	f := &fakeReservations{before: func(n int32, w http.ResponseWriter, _ *http.Request) bool {
		if n > 1 {
			return false
		}
		// The use is taken but the answer is lost: the client must retry
		// with the same orderId and get the replay.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return true
	}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	red, err := fastClient(srv.URL).Reserve(context.Background(), "CODE1",
		client.ReserveRequest{CustomerID: "7", OrderID: "order-7", OrderAmount: 1000})
	require.NoError(t, err)
	require.Equal(t, "order-7", red.OrderID)
	require.Equal(t, client.StatusReserved, red.Status)
	require.Equal(t, int32(2), f.calls.Load())
	require.Equal(t, 1, f.count(), "one reservation whatever the attempts")
}

func TestRetriesOn503And429ThenGivesUp(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1)%2 == 1 {
			writeErr(w, http.StatusServiceUnavailable, client.Unavailable, "", "redis down")
			return
		}
		writeErr(w, http.StatusTooManyRequests, "TOO_MANY_REQUESTS", "", "slow down")
	}))
	t.Cleanup(srv.Close)

	_, err := fastClient(srv.URL, client.WithMaxAttempts(3)).Confirm(context.Background(), "CODE1", "order-1")
	require.Error(t, err)
	require.Equal(t, int32(3), calls.Load())
	require.True(t, client.IsCode(err, client.Unavailable), "last answer is returned: %v", err)
	require.True(t, client.Retryable(err))
}

func TestNoRetryOn4xx(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		writeErr(w, http.StatusConflict, client.OutOfStock, "", "voucher CODE1 has no uses left")
	}))
	t.Cleanup(srv.Close)

	_, err := fastClient(srv.URL).Reserve(context.Background(), "CODE1",
		client.ReserveRequest{CustomerID: "1", OrderID: "o1", OrderAmount: 1})
	require.Error(t, err)
	require.Equal(t, int32(1), calls.Load())
	require.True(t, client.IsCode(err, client.OutOfStock))
	require.False(t, client.IsCode(err, client.AlreadyUsed))
	require.Equal(t, http.StatusConflict, client.StatusOf(err))
	require.False(t, client.Retryable(err))
}

func TestCreateVoucherIsNotRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		writeErr(w, http.StatusServiceUnavailable, client.Unavailable, "", "db down")
	}))
	t.Cleanup(srv.Close)

	_, err := fastClient(srv.URL).CreateVoucher(context.Background(), client.Voucher{Code: "X", DiscountAmount: 1, TotalLimit: 1})
	require.True(t, client.IsCode(err, client.Unavailable))
	require.Equal(t, int32(1), calls.Load())
}

func TestContextDeadlineRespected(t *testing.T) {
	t.Parallel()
	// The handler never reads the body, so the server does not notice the
	// client going away; release it before closing the server.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := fastClient(srv.URL, client.WithMaxAttempts(10)).Reserve(ctx, "CODE1",
		client.ReserveRequest{CustomerID: "1", OrderID: "o1", OrderAmount: 1})
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestRetryAfterBeyondDeadlineFailsFast(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "30")
		writeErr(w, http.StatusServiceUnavailable, client.Unavailable, "", "later")
	}))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := fastClient(srv.URL).Release(ctx, "CODE1", "o1")
	var e *client.Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, 30*time.Second, e.RetryAfter)
	require.Equal(t, int32(1), calls.Load())
	require.Less(t, time.Since(start), 500*time.Millisecond)
}

func TestErrorDecoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		want    client.Error
		retries bool
	}{
		{
			name:   "not eligible with reason",
			status: http.StatusUnprocessableEntity,
			body:   `{"error":"NOT_ELIGIBLE","reason":"ORDER_AMOUNT_TOO_LOW","message":"order amount 5 is below the minimum 10"}`,
			want:   client.Error{Status: 422, Code: client.NotEligible, Reason: client.ReasonOrderAmountTooLow, Message: "order amount 5 is below the minimum 10"},
		},
		{
			name:   "not found",
			status: http.StatusNotFound,
			body:   `{"error":"VOUCHER_NOT_FOUND","message":"no voucher NOPE"}`,
			want:   client.Error{Status: 404, Code: client.VoucherNotFound, Message: "no voucher NOPE"},
		},
		{
			name:    "proxy page",
			status:  http.StatusBadGateway,
			body:    "<html>bad gateway</html>",
			want:    client.Error{Status: 502, Message: "<html>bad gateway</html>"},
			retries: true,
		},
		{
			name:   "held out",
			status: http.StatusConflict,
			body:   `{"error":"HELD_OUT","message":"every use is held","retryAfter":42}`,
			want:   client.Error{Status: 409, Code: client.HeldOut, Message: "every use is held", RetryAfter: 42 * time.Second},
		},
		{
			name:   "budget exceeded",
			status: http.StatusConflict,
			body:   `{"error":"BUDGET_EXCEEDED","message":"1000 left","retryAfter":9,"limit":"budget","budgetRemaining":1000}`,
			want: client.Error{Status: 409, Code: client.BudgetExceeded, Message: "1000 left", RetryAfter: 9 * time.Second,
				Limit: client.LimitBudget, BudgetRemaining: 1000},
		},
		{
			name:   "window full",
			status: http.StatusConflict,
			body:   `{"error":"HELD_OUT","message":"no free uses in this window","retryAfter":9,"limit":"window","nextWindowAt":"2026-12-07T12:00:00Z"}`,
			want: client.Error{Status: 409, Code: client.HeldOut, Message: "no free uses in this window", RetryAfter: 9 * time.Second,
				Limit: client.LimitWindow, NextWindowAt: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)},
		},
		{
			name:   "outside every window",
			status: http.StatusUnprocessableEntity,
			body:   `{"error":"NOT_ELIGIBLE","message":"outside","reason":"OUTSIDE_WINDOW","nextWindowAt":"2026-12-07T12:00:00Z"}`,
			want: client.Error{Status: 422, Code: client.NotEligible, Message: "outside", Reason: client.ReasonOutsideWindow,
				NextWindowAt: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)},
		},
		{
			name:    "outcome unknown",
			status:  http.StatusServiceUnavailable,
			body:    `{"error":"UNAVAILABLE","message":"Kafka did not acknowledge in time","outcomeUnknown":true}`,
			want:    client.Error{Status: 503, Code: client.Unavailable, Message: "Kafka did not acknowledge in time", OutcomeUnknown: true},
			retries: true,
		},
		{
			name:   "empty body",
			status: http.StatusForbidden,
			want:   client.Error{Status: 403, Message: "Forbidden"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			_, err := fastClient(srv.URL, client.WithMaxAttempts(1)).GetVoucher(context.Background(), "NOPE")
			var e *client.Error
			require.True(t, errors.As(err, &e), "got %T %v", err, err)
			require.Equal(t, tc.want, *e)
			require.Equal(t, tc.retries, client.Retryable(err))
			require.NotEmpty(t, e.Error())
		})
	}
}

func TestRequestsAndDecoding(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /vouchers", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		var body map[string]any
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		assert.NotContains(t, body, "reserved", "live counts are not sent")
		assert.NotContains(t, body, "perUserLimit", "zero perUserLimit is left to the server default")
		assert.Equal(t, "FLASH100", body["code"])
		assert.Equal(t, true, body["flashSale"])
		w.WriteHeader(http.StatusCreated)
		body["perUserLimit"] = 1
		_ = json.NewEncoder(w).Encode(body)
	})
	mux.HandleFunc("GET /vouchers/{code}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"code":"` + r.PathValue("code") + `","discountAmount":100000,"minOrderAmount":0,
			"totalLimit":1000,"perUserLimit":1,"startsAt":"2026-12-01T00:00:00Z","endsAt":"2026-12-31T00:00:00Z",
			"flashSale":true,"reserved":12,"confirmed":30,"remaining":958}`))
	})
	mux.HandleFunc("PATCH /vouchers/{code}", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		assert.Equal(t, map[string]any{"totalLimit": float64(2000)}, body)
		_, _ = w.Write([]byte(`{"code":"FLASH100","totalLimit":2000}`))
	})
	mux.HandleFunc("GET /vouchers/{code}/reservations/{orderID}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"orderId":"` + r.PathValue("orderID") + `","voucherCode":"FLASH100","customerId":42,
			"discountAmount":100000,"status":"RESERVED","expiresAt":"2026-12-02T10:15:00Z"}`))
	})
	mux.HandleFunc("POST /vouchers/{code}/reservations/{orderID}/confirm", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"orderId":"` + r.PathValue("orderID") + `","status":"CONFIRMED","discountAmount":100000}`))
	})
	mux.HandleFunc("POST /vouchers/{code}/reservations/{orderID}/extend", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		assert.Equal(t, map[string]any{"seconds": float64(600)}, body)
		_, _ = w.Write([]byte(`{"orderId":"` + r.PathValue("orderID") + `","status":"RESERVED","expiresAt":"2026-12-02T10:25:00Z"}`))
	})
	mux.HandleFunc("DELETE /vouchers/{code}/reservations/{orderID}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"orderId":"` + r.PathValue("orderID") + `","status":"RELEASED","discountAmount":100000}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := fastClient(srv.URL)
	ctx := context.Background()

	v, err := c.CreateVoucher(ctx, client.Voucher{Code: "FLASH100", DiscountAmount: 100000, TotalLimit: 1000,
		StartsAt: start, EndsAt: start.AddDate(0, 0, 30), FlashSale: true, Reserved: 5})
	require.NoError(t, err)
	require.Equal(t, int32(1), v.PerUserLimit)

	v, err = c.GetVoucher(ctx, "FLASH100")
	require.NoError(t, err)
	require.Equal(t, client.Voucher{Code: "FLASH100", DiscountAmount: 100000, TotalLimit: 1000, PerUserLimit: 1,
		StartsAt: start, EndsAt: start.AddDate(0, 0, 30), FlashSale: true, Reserved: 12, Confirmed: 30, Remaining: 958}, *v)

	limit := int32(2000)
	v, err = c.PatchVoucher(ctx, "FLASH100", client.VoucherPatch{TotalLimit: &limit})
	require.NoError(t, err)
	require.Equal(t, int32(2000), v.TotalLimit)

	red, err := c.GetReservation(ctx, "FLASH100", "order-42")
	require.NoError(t, err)
	require.Equal(t, "42", red.CustomerID, "a JSON number is read as its digits")
	require.Equal(t, time.Date(2026, 12, 2, 10, 15, 0, 0, time.UTC), red.ExpiresAt)

	red, err = c.Extend(ctx, "FLASH100", "order-42", 600)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 12, 2, 10, 25, 0, 0, time.UTC), red.ExpiresAt)

	red, err = c.Confirm(ctx, "FLASH100", "order-42")
	require.NoError(t, err)
	require.Equal(t, client.StatusConfirmed, red.Status)

	red, err = c.Release(ctx, "FLASH100", "order-42")
	require.NoError(t, err)
	require.Equal(t, client.StatusReleased, red.Status)
}

func TestConnectionRefusedIsRetriedThenReturned(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more

	_, err := fastClient(url, client.WithMaxAttempts(3)).Reserve(context.Background(), "C",
		client.ReserveRequest{CustomerID: "1", OrderID: "o", OrderAmount: 1})
	var tErr *client.TransportError
	require.True(t, errors.As(err, &tErr), "got %T %v", err, err)
	require.True(t, client.Retryable(err))
}

// TestOutcomeUnknownSticksThroughPlain503s: once an attempt may have taken
// effect, a later plain 503 (that retry took nothing itself) does not make
// the call look like nothing was taken.
func TestOutcomeUnknownSticksThroughPlain503s(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		if calls.Add(1) == 1 {
			_, _ = w.Write([]byte(`{"error":"UNAVAILABLE","message":"reply lost","outcomeUnknown":true}`))
			return
		}
		_, _ = w.Write([]byte(`{"error":"UNAVAILABLE","message":"the database is unavailable"}`))
	}))
	t.Cleanup(srv.Close)
	_, err := fastClient(srv.URL, client.WithMaxAttempts(3)).Reserve(context.Background(), "CODE1",
		client.ReserveRequest{CustomerID: "1", OrderID: "order-1", OrderAmount: 100})
	require.Equal(t, int32(3), calls.Load())
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "the database is unavailable", apiErr.Message, "the last answer")
	require.True(t, apiErr.OutcomeUnknown, "the first attempt's outcome is still unknown")

	// Plain 503s alone stay plain.
	calls.Store(1)
	_, err = fastClient(srv.URL, client.WithMaxAttempts(2)).Reserve(context.Background(), "CODE1",
		client.ReserveRequest{CustomerID: "1", OrderID: "order-2", OrderAmount: 100})
	require.ErrorAs(t, err, &apiErr)
	require.False(t, apiErr.OutcomeUnknown)
}

// Reserve sends customerId as a JSON string; a redemption's customerId is
// read whether the server wrote it as a number (an integer id) or a string.
func TestCustomerIDForms(t *testing.T) {
	t.Parallel()
	var sent atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		sent.Store(body["customerId"])
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"orderId":"o-1","status":"RESERVED","discountAmount":1,"expiresAt":"2026-12-02T10:15:00Z"}`))
	}))
	t.Cleanup(srv.Close)
	_, err := fastClient(srv.URL).Reserve(context.Background(), "CODE1",
		client.ReserveRequest{CustomerID: "jane@example.com", OrderID: "o-1", OrderAmount: 1000})
	require.NoError(t, err)
	require.Equal(t, "jane@example.com", sent.Load())

	for wire, want := range map[string]string{`42`: "42", `"42"`: "42", `"cus_9X+a@b.c"`: "cus_9X+a@b.c", `null`: ""} {
		var r client.Redemption
		require.NoError(t, json.Unmarshal([]byte(`{"orderId":"o-1","customerId":`+wire+`,"status":"RESERVED","discountAmount":5}`), &r))
		require.Equal(t, client.Redemption{OrderID: "o-1", CustomerID: want, Status: client.StatusReserved, DiscountAmount: 5}, r, wire)
	}
	var r client.Redemption
	require.Error(t, json.Unmarshal([]byte(`{"customerId":true}`), &r))
}
