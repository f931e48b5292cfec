package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// forEachMode runs a behavioural test in standard, flash-sync and
// flash-kafka mode: the contract is the same in all three.
func forEachMode(t *testing.T, fn func(t *testing.T, s *stack)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newStack(t, m.opts))
		})
	}
}

func TestConcurrentReservationsNeverOversell(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 10})
		var created, outOfStock, other atomic.Int64
		parallel(200, 200, func(i int) {
			r := s.reserve(code, int64(i+1), fmt.Sprintf("o-%d", i), 5000)
			switch {
			case r.status == http.StatusCreated:
				created.Add(1)
			case r.status == http.StatusConflict && r.str("error") == "HELD_OUT": // every use is RESERVED
				outOfStock.Add(1)
			default:
				other.Add(1)
				t.Errorf("unexpected answer %d %s", r.status, r.raw)
			}
		})
		require.EqualValues(t, 10, created.Load())
		require.EqualValues(t, 190, outOfStock.Load())
		s.settle(code, 10)
		st := s.state(code)
		require.Equal(t, 10, st.usedCount)
		require.Equal(t, 10, st.reserved)
		s.assertConsistent(code)
	})
}

func TestSameOrderIDConcurrentlyTakesOneUse(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 10})
		bodies := make([]string, 50)
		statuses := make([]int, 50)
		parallel(50, 50, func(i int) {
			r := s.reserve(code, 7, "same-order", 5000)
			statuses[i], bodies[i] = r.status, string(r.raw)
		})
		for i := range bodies {
			require.Equal(t, http.StatusCreated, statuses[i], bodies[i])
			require.JSONEq(t, bodies[0], bodies[i])
		}
		s.settle(code, 1)
		st := s.state(code)
		require.Equal(t, 1, st.usedCount)
		require.Equal(t, 1, st.reserved)
		s.assertConsistent(code)
	})
}

func TestPerUserLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 100, PerUserLimit: 3})
		var created, already atomic.Int64
		parallel(20, 20, func(i int) {
			r := s.reserve(code, 99, fmt.Sprintf("q-%d", i), 5000)
			switch {
			case r.status == http.StatusCreated:
				created.Add(1)
			case r.status == http.StatusConflict && r.str("error") == "ALREADY_USED":
				already.Add(1)
			default:
				t.Errorf("unexpected answer %d %s", r.status, r.raw)
			}
		})
		require.EqualValues(t, 3, created.Load())
		require.EqualValues(t, 17, already.Load())
		s.settle(code, 3)
		s.assertConsistent(code)
	})
}

func TestLifecycleReleaseReuseAndConflicts(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 5})
		other := s.createVoucher(voucherSpec{TotalLimit: 5})

		r := s.reserve(code, 1, "life-1", 5000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, "RESERVED", r.str("status"))
		require.EqualValues(t, 1000, r.num("discountAmount"))
		require.Equal(t, "life-1", r.str("orderId"))
		_, err := time.Parse(time.RFC3339, r.str("expiresAt"))
		require.NoError(t, err)

		// The same customer cannot hold a second use with perUserLimit 1.
		r = s.reserve(code, 1, "life-2", 5000)
		require.Equal(t, http.StatusConflict, r.status)
		require.Equal(t, "ALREADY_USED", r.str("error"))

		// Same orderId, another customer or another code: conflict.
		r = s.reserve(code, 2, "life-1", 5000)
		require.Equal(t, http.StatusConflict, r.status)
		require.Equal(t, "ORDER_CONFLICT", r.str("error"))
		r = s.reserve(other, 1, "life-1", 5000)
		require.Equal(t, http.StatusConflict, r.status)
		require.Equal(t, "ORDER_CONFLICT", r.str("error"))

		// Release (twice: idempotent), then the customer reserves again.
		r = s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/life-1", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, "RELEASED", r.str("status"))
		r = s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/life-1", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, "RELEASED", r.str("status"))
		r = s.reserve(code, 1, "life-1", 5000)
		require.Equal(t, http.StatusConflict, r.status)
		require.Equal(t, "ORDER_RELEASED", r.str("error"))
		r = s.reserve(code, 1, "life-3", 5000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))

		// Confirm twice, then release the confirmed one: the use comes back.
		r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations/life-3/confirm", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, "CONFIRMED", r.str("status"))
		r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations/life-3/confirm", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, "CONFIRMED", r.str("status"))
		r = s.do(http.MethodGet, "/vouchers/"+code+"/reservations/life-3", nil)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "CONFIRMED", r.str("status"))
		require.EqualValues(t, 1, r.num("customerId"))

		r = s.do(http.MethodGet, "/vouchers/"+code, nil)
		require.Equal(t, http.StatusOK, r.status)
		require.EqualValues(t, 1, r.num("confirmed"))
		require.EqualValues(t, 0, r.num("reserved"))
		require.EqualValues(t, 4, r.num("remaining"))

		r = s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/life-3", nil)
		require.Equal(t, http.StatusOK, r.status)
		r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations/life-3/confirm", nil)
		require.Equal(t, http.StatusConflict, r.status)
		require.Equal(t, "RESERVATION_RELEASED", r.str("error"))

		r = s.do(http.MethodGet, "/vouchers/"+code+"/reservations/nope", nil)
		require.Equal(t, http.StatusNotFound, r.status)
		r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations/nope/confirm", nil)
		require.Equal(t, http.StatusNotFound, r.status)
		r = s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/nope", nil)
		require.Equal(t, http.StatusNotFound, r.status)

		st := s.state(code)
		require.Equal(t, 0, st.usedCount)
		require.Equal(t, 2, st.released)
		s.assertConsistent(code)
	})
}

func TestEligibilityAndBadInputChangeNothing(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		live := s.createVoucher(voucherSpec{TotalLimit: 5, MinOrderAmount: 1000})
		future := s.createVoucher(voucherSpec{StartsAt: time.Now().Add(time.Hour), EndsAt: time.Now().Add(2 * time.Hour)})
		past := s.createEndedVoucher()
		reserveBody := func(customer any, order any, amount any) string {
			return fmt.Sprintf(`{"customerId":%v,"orderId":%v,"orderAmount":%v}`, customer, order, amount)
		}
		cases := []struct {
			name   string
			code   string
			body   string
			status int
			err    string
			reason string
		}{
			{"not started", future, reserveBody(1, `"e1"`, 5000), 422, "NOT_ELIGIBLE", "NOT_STARTED"},
			{"expired", past, reserveBody(1, `"e2"`, 5000), 422, "NOT_ELIGIBLE", "EXPIRED"},
			{"order amount too low", live, reserveBody(1, `"e3"`, 999), 422, "NOT_ELIGIBLE", "ORDER_AMOUNT_TOO_LOW"},
			{"unknown code", "NOPE-" + live, reserveBody(1, `"e4"`, 5000), 404, "VOUCHER_NOT_FOUND", ""},
			{"customer zero", live, reserveBody(0, `"e5"`, 5000), 400, "INVALID_REQUEST", ""},
			{"customer negative", live, reserveBody(-3, `"e5"`, 5000), 400, "INVALID_REQUEST", ""},
			{"customer string with a space", live, reserveBody(`"a b"`, `"e5"`, 5000), 400, "INVALID_REQUEST", ""},
			{"customer string too long", live, reserveBody(`"`+strings.Repeat("c", 65)+`"`, `"e5"`, 5000), 400, "INVALID_REQUEST", ""},
			{"customer empty string", live, reserveBody(`""`, `"e5"`, 5000), 400, "INVALID_REQUEST", ""},
			{"customer fraction", live, reserveBody(1.5, `"e5"`, 5000), 400, "INVALID_REQUEST", ""},
			{"customer overflows int64", live, reserveBody("9223372036854775808", `"e5"`, 5000), 400, "INVALID_REQUEST", ""},
			{"empty orderId", live, reserveBody(1, `""`, 5000), 400, "INVALID_REQUEST", ""},
			{"orderId too long", live, reserveBody(1, `"`+strings.Repeat("x", 65)+`"`, 5000), 400, "INVALID_REQUEST", ""},
			{"orderId with slash", live, reserveBody(1, `"a/b"`, 5000), 400, "INVALID_REQUEST", ""},
			{"negative amount", live, reserveBody(1, `"e6"`, -1), 400, "INVALID_REQUEST", ""},
			{"missing amount", live, `{"customerId":1,"orderId":"e7"}`, 400, "INVALID_REQUEST", ""},
			{"missing customer", live, `{"orderId":"e7","orderAmount":5000}`, 400, "INVALID_REQUEST", ""},
			{"malformed JSON", live, `{"customerId":1,`, 400, "INVALID_REQUEST", ""},
			{"not an object", live, `[1,2]`, 400, "INVALID_REQUEST", ""},
			{"empty body", live, ``, 400, "INVALID_REQUEST", ""},
			{"unknown field", live, `{"customerId":1,"orderId":"e8","orderAmount":5000,"coupon":"x"}`, 400, "INVALID_REQUEST", ""},
			{"trailing data", live, `{"customerId":1,"orderId":"e9","orderAmount":5000} {}`, 400, "INVALID_REQUEST", ""},
			{"oversized body", live, `{"customerId":1,"orderId":"e10","orderAmount":5000,"pad":"` + strings.Repeat("x", 17<<10) + `"}`, 400, "INVALID_REQUEST", ""},
		}
		for _, c := range cases {
			r := s.do(http.MethodPost, "/vouchers/"+c.code+"/reservations", c.body)
			require.Equal(t, c.status, r.status, "%s: %s", c.name, r.raw)
			require.Equal(t, c.err, r.str("error"), c.name)
			require.Equal(t, c.reason, r.str("reason"), c.name)
			require.NotEmpty(t, r.str("message"), c.name)
		}
		for _, code := range []string{live, future, past} {
			st := s.state(code)
			require.Zero(t, st.usedCount+st.reserved+st.confirmed+st.released, "a rejected request changed %s", code)
			s.assertConsistent(code)
		}
	})
}

func TestVoucherAdministration(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	code := s.createVoucher(voucherSpec{TotalLimit: 2})

	r := s.do(http.MethodGet, "/vouchers/"+code, nil)
	require.Equal(t, http.StatusOK, r.status)
	for _, f := range []string{"code", "discountAmount", "minOrderAmount", "totalLimit", "perUserLimit", "startsAt", "endsAt", "flashSale", "reserved", "confirmed", "remaining"} {
		require.Contains(t, r.body, f)
	}

	// Dates relative to now: a window that has already ended is refused.
	earlier := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
	ended := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	soon := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	later := time.Now().Add(365 * 24 * time.Hour).UTC().Format(time.RFC3339)
	dup := s.do(http.MethodPost, "/vouchers", map[string]any{"code": code, "discountAmount": 1, "totalLimit": 1,
		"startsAt": earlier, "endsAt": later})
	require.Equal(t, http.StatusConflict, dup.status)
	require.Equal(t, "VOUCHER_EXISTS", dup.str("error"))

	bad := []map[string]any{
		{"code": "has space", "discountAmount": 1, "totalLimit": 1, "startsAt": earlier, "endsAt": later},
		{"code": strings.Repeat("A", 33), "discountAmount": 1, "totalLimit": 1, "startsAt": earlier, "endsAt": later},
		{"code": "OK1", "discountAmount": 0, "totalLimit": 1, "startsAt": earlier, "endsAt": later},
		{"code": "OK2", "discountAmount": 1, "totalLimit": 0, "startsAt": earlier, "endsAt": later},
		{"code": "OK3", "discountAmount": 1, "totalLimit": 3000000000, "startsAt": earlier, "endsAt": later},
		{"code": "OK4", "discountAmount": 1, "totalLimit": 1, "perUserLimit": 0, "startsAt": earlier, "endsAt": later},
		{"code": "OK5", "discountAmount": 1, "totalLimit": 1, "minOrderAmount": -1, "startsAt": earlier, "endsAt": later},
		{"code": "OK6", "discountAmount": 1, "totalLimit": 1, "startsAt": later, "endsAt": soon},
		{"code": "OK7", "discountAmount": 1, "totalLimit": 1, "startsAt": "yesterday", "endsAt": later},
		{"code": "OK8", "discountAmount": 1.5, "totalLimit": 1, "startsAt": earlier, "endsAt": later},
		{"code": "OK9", "totalLimit": 1, "startsAt": earlier, "endsAt": later},
		{"code": "OK10", "discountAmount": 1, "totalLimit": 1, "startsAt": earlier, "endsAt": ended},
	}
	for _, b := range bad {
		r := s.do(http.MethodPost, "/vouchers", b)
		require.Equal(t, http.StatusBadRequest, r.status, "%v: %s", b, r.raw)
		require.Equal(t, "INVALID_REQUEST", r.str("error"))
	}

	// Auth: no token, wrong token, API token on an admin route.
	r = s.doToken(http.MethodGet, "/vouchers/"+code, nil, "")
	require.Equal(t, http.StatusUnauthorized, r.status)
	r = s.doToken(http.MethodGet, "/vouchers/"+code, nil, "wrong")
	require.Equal(t, http.StatusUnauthorized, r.status)
	r = s.doToken(http.MethodPatch, "/vouchers/"+code, map[string]any{"totalLimit": 5}, testAPIToken)
	require.Equal(t, http.StatusUnauthorized, r.status)

	// Patch: raise, lower below held, unknown.
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "adm-1", 100).status)
	require.Equal(t, http.StatusCreated, s.reserve(code, 2, "adm-2", 100).status)
	r = s.reserve(code, 3, "adm-3", 100)
	require.Equal(t, "HELD_OUT", r.str("error"))
	r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"totalLimit": 1})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "LIMIT_BELOW_HELD", r.str("error"))
	r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"totalLimit": 3})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.EqualValues(t, 3, r.num("totalLimit"))
	require.Equal(t, http.StatusCreated, s.reserve(code, 3, "adm-3b", 100).status)
	r = s.do(http.MethodPatch, "/vouchers/NOPE"+code, map[string]any{"totalLimit": 3})
	require.Equal(t, http.StatusNotFound, r.status)
	r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"bogus": 3})
	require.Equal(t, http.StatusBadRequest, r.status)
	r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"endsAt": ended})
	require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
	require.Contains(t, r.str("message"), "already past")
	r = s.do(http.MethodGet, "/vouchers/"+code, nil)
	endsAt, err := time.Parse(time.RFC3339Nano, r.str("endsAt"))
	require.NoError(t, err)
	require.True(t, endsAt.After(time.Now()), "a refused patch changed endsAt to %s", endsAt)
	r = s.do(http.MethodGet, "/vouchers/NOPE"+code, nil)
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "VOUCHER_NOT_FOUND", r.str("error"))
	s.assertConsistent(code)

	require.Equal(t, http.StatusOK, s.doToken(http.MethodGet, "/healthz", nil, "").status)
	require.Equal(t, http.StatusOK, s.doToken(http.MethodGet, "/readyz", nil, "").status)
}

func TestExpiryReturnsTheUse(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			opts := m.opts
			opts.ttl = time.Second
			s := newStack(t, opts)
			code := s.createVoucher(voucherSpec{TotalLimit: 2})
			require.Equal(t, http.StatusCreated, s.reserve(code, 1, "x-1", 100).status)
			require.Equal(t, http.StatusCreated, s.reserve(code, 2, "x-2", 100).status)
			s.settle(code, 2)
			r := s.do(http.MethodPost, "/vouchers/"+code+"/reservations/x-2/confirm", nil)
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			require.Equal(t, "HELD_OUT", s.reserve(code, 3, "x-3", 100).str("error"), "x-1 is RESERVED")

			require.Eventually(t, func() bool { return s.state(code).released == 1 }, 10*time.Second, 50*time.Millisecond)
			r = s.do(http.MethodGet, "/vouchers/"+code+"/reservations/x-1", nil)
			require.Equal(t, "RELEASED", r.str("status"))
			r = s.reserve(code, 1, "x-1", 100)
			require.Equal(t, "ORDER_RELEASED", r.str("error"))
			// The use came back: another customer gets it (after the sold-out
			// cache's TTL in flash modes).
			require.Eventually(t, func() bool {
				return s.reserve(code, 3, "x-3", 100).status == http.StatusCreated
			}, 5*time.Second, 100*time.Millisecond)
			s.settle(code, 2)
			s.assertConsistent(code)
		})
	}
}

// A retry of a reservation answers with the order's state in the database,
// in every mode: CONFIRMED once confirmed, ORDER_RELEASED once released, even
// in the moment between the expiry job's database release and its release in
// the gate (CI once saw a flash-kafka retry answer RESERVED there).
func TestRetryAnswersTheStoredState(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 3})
		require.Equal(t, http.StatusCreated, s.reserve(code, 1, "st-1", 5000).status)
		require.Equal(t, http.StatusCreated, s.reserve(code, 2, "st-2", 5000).status)
		s.settle(code, 2)

		s.confirm(code, "st-1")
		r := s.reserve(code, 1, "st-1", 5000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, "CONFIRMED", r.str("status"))

		// The expiry job's first step alone: the row is released in the
		// database, the gate still holds the use.
		expired, err := s.app.store.ExpireDue(context.Background(), time.Now().Add(time.Hour), 0)
		require.NoError(t, err)
		require.Len(t, expired, 1)
		require.Equal(t, "st-2", expired[0].OrderID)
		r = s.reserve(code, 2, "st-2", 5000)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "ORDER_RELEASED", r.str("error"))
		r = s.do(http.MethodGet, "/vouchers/"+code+"/reservations/st-2", nil)
		require.Equal(t, "RELEASED", r.str("status"))
	})
}
