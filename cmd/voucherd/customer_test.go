package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reserveAs reserves with any JSON value as the customerId, retrying a 503
// with the same orderId (as the contract says; in Kafka mode a voucher just
// created may not be loaded into Redis while the consumer catches up) for
// at most 15 seconds.
func (s *stack) reserveAs(code string, customer any, orderID string) response {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := s.do(http.MethodPost, "/vouchers/"+code+"/reservations", map[string]any{
			"customerId": customer, "orderId": orderID, "orderAmount": 5000,
		})
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createNormalizingVoucher creates a voucher with the given
// customerIdNormalization and answers its code.
func (s *stack) createNormalizingVoucher(normalization string, perUser int) string {
	s.t.Helper()
	code := fmt.Sprintf("N%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	r := s.do(http.MethodPost, "/vouchers", map[string]any{
		"code": code, "discountAmount": 1000, "totalLimit": 10, "perUserLimit": perUser,
		"startsAt": "2020-01-01T00:00:00Z", "endsAt": "2999-01-01T00:00:00Z", "flashSale": s.opts.flash,
		"customerIdNormalization": normalization,
	})
	require.Equal(s.t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(s.t, normalization, r.str("customerIdNormalization"))
	return code
}

// Two spellings of one e-mail address are one customer for a voucher that
// normalises e-mail addresses, in every mode: the per-customer limit counts
// them once, and the stored and answered customerId is the normalised one.
func TestEmailNormalizedCustomerLimit(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createNormalizingVoucher("email", 1)

		r := s.reserveAs(code, "Jane.Doe+shop@GMail.com", "n-1")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		for i, spelling := range []string{"janedoe@googlemail.com", "j.a.n.e.d.o.e+x@gmail.com", "JANEDOE@GMAIL.COM"} {
			r = s.reserveAs(code, spelling, "n-x"+string(rune('a'+i)))
			require.Equal(t, http.StatusConflict, r.status, "%s: %s", spelling, r.raw)
			require.Equal(t, "ALREADY_USED", r.str("error"))
			require.Contains(t, r.str("message"), "janedoe@gmail.com")
		}
		// A retry of the order under another spelling is its replay.
		r = s.reserveAs(code, "jane.doe@gmail.com", "n-1")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		// A validation counts the spellings as one customer too.
		r = s.do(http.MethodPost, "/vouchers/"+code+"/validation", map[string]any{"customerId": "JaneDoe+cart@googlemail.com", "orderAmount": 5000})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, false, r.body["valid"], string(r.raw))
		require.Equal(t, "ALREADY_USED", r.str("code"))
		// Another mailbox is another customer.
		r = s.reserveAs(code, "john@gmail.com", "n-2")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		s.settle(code, 2)

		// A retry after a failed payment under another spelling replaces the
		// customer's own hold.
		r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations", map[string]any{
			"customerId": "JOHN+retry@GMAIL.COM", "orderId": "n-3", "orderAmount": 5000, "replacesOrderId": "n-2"})
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		r = s.reserveAs(code, "john@gmail.com", "n-2")
		require.Equal(t, "ORDER_RELEASED", r.str("error"), string(r.raw))
		s.settle(code, 2)

		r = s.do(http.MethodGet, "/vouchers/"+code+"/reservations/n-1", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, "janedoe@gmail.com", r.str("customerId"))
		var stored string
		require.NoError(t, s.db.QueryRow(t.Context(), `SELECT customer FROM voucher_redemption WHERE order_id = 'n-1'`).Scan(&stored))
		require.Equal(t, "janedoe@gmail.com", stored)

		// The admin filter takes any spelling for this voucher.
		r = s.doToken(http.MethodGet, "/vouchers/"+code+"/reservations?customerId="+url.QueryEscape("Jane.Doe+a@googlemail.com"), nil, testAdminToken)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Contains(t, string(r.raw), `"orderId":"n-1"`)
		require.NotContains(t, string(r.raw), `"orderId":"n-2"`)

		// Without normalisation, spellings are different customers.
		plain := s.createNormalizingVoucher("none", 1)
		require.Equal(t, http.StatusCreated, s.reserveAs(plain, "Jane@X.com", "p-1").status)
		require.Equal(t, http.StatusCreated, s.reserveAs(plain, "jane@x.com", "p-2").status)
		r = s.do(http.MethodGet, "/vouchers/"+plain+"/reservations/p-1", nil)
		require.Equal(t, "Jane@X.com", r.str("customerId"))
		s.settle(plain, 2)
		s.assertConsistent(code)
		s.assertConsistent(plain)
	})
}

// String customerIds in every mode: an integer and its decimal string are
// one customer (answered as a number), other strings are compared exactly,
// and a malformed id is a 400 that changes nothing.
func TestStringCustomerIDs(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 10, PerUserLimit: 1})
		r := s.reserveAs(code, 42, "s-1")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		r = s.reserveAs(code, "42", "s-2")
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "ALREADY_USED", r.str("error"))
		r = s.reserveAs(code, 42.0, "s-1")
		require.Equal(t, http.StatusCreated, r.status, "a replay: %s", r.raw)
		require.Equal(t, http.StatusCreated, s.reserveAs(code, "042", "s-3").status, `"042" is another customer`)
		long := "cus_" + strings.Repeat("x", 56) + "@a.b"
		require.Equal(t, http.StatusCreated, s.reserveAs(code, long, "s-4").status)
		r = s.reserveAs(code, "cus_other", "s-4")
		require.Equal(t, http.StatusConflict, r.status)
		require.Equal(t, "ORDER_CONFLICT", r.str("error"))
		s.settle(code, 3)

		r = s.do(http.MethodGet, "/vouchers/"+code+"/reservations/s-1", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Contains(t, string(r.raw), `"customerId":42,`, "an integer id is answered as a number")
		r = s.do(http.MethodGet, "/vouchers/"+code+"/reservations/s-3", nil)
		require.Contains(t, string(r.raw), `"customerId":"042",`)
		r = s.doToken(http.MethodGet, "/customers/"+url.PathEscape(long)+"/redemptions", nil, testAdminToken)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Contains(t, string(r.raw), `"orderId":"s-4"`)
		r = s.doToken(http.MethodGet, "/customers/42/redemptions", nil, testAdminToken)
		require.Contains(t, string(r.raw), `"orderId":"s-1"`)
		r = s.doToken(http.MethodGet, "/vouchers/"+code+"/reservations?customerId=042", nil, testAdminToken)
		require.Contains(t, string(r.raw), `"orderId":"s-3"`)
		require.NotContains(t, string(r.raw), `"orderId":"s-1"`)

		before := s.state(code)
		for _, bad := range []any{"", "a b", "a/b", "é", strings.Repeat("c", 65), 0, -1, 1.5, true, nil, map[string]any{}} {
			r := s.reserveAs(code, bad, "s-bad")
			require.Equal(t, http.StatusBadRequest, r.status, "%v: %s", bad, r.raw)
			require.Equal(t, "INVALID_REQUEST", r.str("error"))
		}
		for _, path := range []string{"/customers/a%20b/redemptions", "/customers/" + strings.Repeat("c", 65) + "/redemptions",
			"/vouchers/" + code + "/reservations?customerId=a%2Fb"} {
			r := s.doToken(http.MethodGet, path, nil, testAdminToken)
			require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", path, r.raw)
		}
		require.Equal(t, before, s.state(code), "malformed ids change nothing")

		// The normalisation is chosen at creation only.
		r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"customerIdNormalization": "email"})
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
		r = s.do(http.MethodPost, "/vouchers", map[string]any{
			"code": code + "N", "discountAmount": 1000, "totalLimit": 10,
			"startsAt": "2020-01-01T00:00:00Z", "endsAt": "2999-01-01T00:00:00Z", "customerIdNormalization": "phone",
		})
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
		s.assertConsistent(code)
	})
}
