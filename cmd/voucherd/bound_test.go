package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reserveIn reserves as customer with the given currency ("": none),
// retrying a 503 as reserveAs does.
func (s *stack) reserveIn(code, customer, orderID, currency string) response {
	s.t.Helper()
	body := map[string]any{"customerId": customer, "orderId": orderID, "orderAmount": 5000}
	if currency != "" {
		body["currency"] = currency
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := s.do(http.MethodPost, "/vouchers/"+code+"/reservations", body)
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// requireNotEligible asserts a 422 NOT_ELIGIBLE answer with reason.
func requireNotEligible(t *testing.T, r response, reason string) {
	t.Helper()
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, "NOT_ELIGIBLE", r.str("error"), string(r.raw))
	require.Equal(t, reason, r.str("reason"), string(r.raw))
}

// A voucher with a currency and a customer refuses any other currency (or
// none) and any other customer with 422 NOT_ELIGIBLE, in every mode, for
// reservations, replacements and validations, and changes nothing; its
// customer in its currency reserves. A campaign's currency binds its codes.
func TestBoundVoucher(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := fmt.Sprintf("B%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
		create := map[string]any{
			"code": code, "discountAmount": 1000, "totalLimit": 10, "perUserLimit": 2,
			"startsAt": "2020-01-01T00:00:00Z", "endsAt": "2999-01-01T00:00:00Z", "flashSale": s.opts.flash,
			"customerIdNormalization": "email", "currency": "EUR", "customerId": "Anna+vip@Example.com",
		}
		for _, bad := range []map[string]any{{"currency": "eur"}, {"currency": "EURO"}, {"currency": 978}, {"customerId": "anna example"}} {
			body := map[string]any{}
			for k, v := range create {
				body[k] = v
			}
			for k, v := range bad {
				body[k] = v
			}
			r := s.do(http.MethodPost, "/vouchers", body)
			require.Equal(t, http.StatusBadRequest, r.status, "%v: %s", bad, r.raw)
		}
		r := s.do(http.MethodPost, "/vouchers", create)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, "EUR", r.str("currency"))
		require.Equal(t, "anna@example.com", r.str("customerId"), "stored as its normalisation folds it")
		r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"currency": "USD"})
		require.Equal(t, http.StatusBadRequest, r.status, "set at creation only: %s", r.raw)

		before := s.state(code)
		requireNotEligible(t, s.reserveIn(code, "bob@example.com", "b-1", "EUR"), "CUSTOMER_MISMATCH")
		requireNotEligible(t, s.reserveIn(code, "bob@example.com", "b-2", "USD"), "CUSTOMER_MISMATCH")
		requireNotEligible(t, s.reserveIn(code, "anna@example.com", "b-3", "USD"), "CURRENCY_MISMATCH")
		requireNotEligible(t, s.reserveIn(code, "anna@example.com", "b-4", ""), "CURRENCY_MISMATCH")
		r = s.reserveIn(code, "anna@example.com", "b-5", "eur")
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
		for _, tc := range []struct{ customer, currency, reason string }{
			{"bob@example.com", "EUR", "CUSTOMER_MISMATCH"},
			{"ANNA@example.com", "GBP", "CURRENCY_MISMATCH"},
		} {
			r = s.do(http.MethodPost, "/vouchers/"+code+"/validation", map[string]any{
				"customerId": tc.customer, "orderAmount": 5000, "currency": tc.currency})
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			require.Equal(t, false, r.body["valid"], string(r.raw))
			require.Equal(t, "NOT_ELIGIBLE", r.str("code"))
			require.Equal(t, tc.reason, r.str("reason"))
		}
		require.Equal(t, before, s.state(code), "a refusal changes nothing")
		if s.opts.flash {
			st, err := s.app.gate.Inspect(t.Context(), code)
			require.NoError(t, err)
			require.Equal(t, int64(10), int64(st.Remaining), "the gate took nothing")
		}

		r = s.reserveIn(code, "Anna@example.com", "a-1", "EUR")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		// Another customer cannot replace the bound customer's hold.
		r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations", map[string]any{
			"customerId": "bob@example.com", "orderId": "b-6", "orderAmount": 5000, "currency": "EUR", "replacesOrderId": "a-1"})
		requireNotEligible(t, r, "CUSTOMER_MISMATCH")
		// A known orderId is answered before eligibility: its replay.
		r = s.reserveIn(code, "anna@example.com", "a-1", "USD")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		s.settle(code, 1)
		s.assertConsistent(code)

		// A campaign's currency binds every code.
		r = s.createCampaign(map[string]any{"currency": "USD", "codeCount": 2, "flashSale": s.opts.flash})
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, "USD", r.str("currency"))
		id := r.str("id")
		codes := s.campaignCodes(id, 10)
		require.Len(t, codes, 2)
		requireNotEligible(t, s.reserveIn(codes[0], "7", "c-1", "EUR"), "CURRENCY_MISMATCH")
		r = s.reserveIn(codes[0], "7", "c-2", "USD")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		r = s.createCampaign(map[string]any{"customerId": "7"})
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
		s.settle(id, 1)
		s.assertConsistent(id)
	})
}

// voucherd voucher create takes --currency and --customer and prints them;
// voucherd reserve and validate take --currency.
func TestCLIBoundVoucher(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	cli := func(token string, args ...string) (string, error) {
		var out, errOut strings.Builder
		n := 2
		if args[0] != "voucher" {
			n = 1
		}
		args = append(args[:n:n], append([]string{"--url", s.base, "--token", token}, args[n:]...)...)
		err := run(t.Context(), args, &out, &errOut)
		return out.String(), err
	}
	code := fmt.Sprintf("BC%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	out, err := cli(testAdminToken, "voucher", "create", "--code", code, "--discount", "100", "--total", "3",
		"--currency", "EUR", "--customer", "cus_7")
	require.NoError(t, err)
	require.Contains(t, out, "currency    EUR\n")
	require.Contains(t, out, "customer    only cus_7\n")
	_, err = cli(testAPIToken, "reserve", "--customer", "cus_7", "--order", code+"-1", "--amount", "500", "--currency", "USD", code)
	require.ErrorContains(t, err, "CURRENCY_MISMATCH")
	out, err = cli(testAPIToken, "validate", "--customer", "cus_8", "--amount", "500", "--currency", "EUR", code)
	require.NoError(t, err)
	require.Contains(t, out, `"reason": "CUSTOMER_MISMATCH"`)
	out, err = cli(testAPIToken, "reserve", "--customer", "cus_7", "--order", code+"-1", "--amount", "500", "--currency", "EUR", code)
	require.NoError(t, err)
	require.Contains(t, out, `"status": "RESERVED"`)
}
