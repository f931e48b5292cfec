package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func (s *stack) replace(code string, customer int64, orderID, replaces string, amount int64) response {
	s.t.Helper()
	return s.do(http.MethodPost, "/vouchers/"+code+"/reservations", map[string]any{
		"customerId": customer, "orderId": orderID, "orderAmount": amount, "replacesOrderId": replaces,
	})
}

func (s *stack) validate(code string, body map[string]any) response {
	s.t.Helper()
	return s.do(http.MethodPost, "/vouchers/"+code+"/validation", body)
}

// A customer replacing their hold of the last use of a 1-use voucher, again
// and again, while other customers hammer the voucher: every replacement
// takes the use over, no other customer ever gets it, PostgreSQL never
// holds more than one use, and each replaced order answers ORDER_RELEASED.
func TestReplaceNeverLosesTheLastUse(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 1})
		r := s.reserve(code, 1, "r-0", 5000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))

		var violations atomic.Int64
		stop := s.sampleOversell(code, &violations)
		const replacements = 15
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= replacements; i++ {
				r := s.replace(code, 1, fmt.Sprintf("r-%d", i), fmt.Sprintf("r-%d", i-1), 5000)
				if r.status != http.StatusCreated {
					t.Errorf("replacement %d: %d %s", i, r.status, r.raw)
					return
				}
			}
		}()
		var others atomic.Int64
		parallel(300, 8, func(i int) {
			r := s.reserve(code, int64(100+i), fmt.Sprintf("x-%d", i), 5000)
			others.Add(1)
			if r.status != http.StatusConflict || r.str("error") != "HELD_OUT" {
				t.Errorf("another customer: %d %s", r.status, r.raw)
			}
		})
		wg.Wait()
		stop()
		require.Zero(t, violations.Load(), "PostgreSQL held more than totalLimit")

		last := fmt.Sprintf("r-%d", replacements)
		again := s.replace(code, 1, last, fmt.Sprintf("r-%d", replacements-1), 5000)
		require.Equal(t, http.StatusCreated, again.status, "a replayed replacement answers as the first: %s", again.raw)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		for i := 0; i < replacements; i++ {
			r := s.reserve(code, 1, fmt.Sprintf("r-%d", i), 5000)
			require.Equal(t, http.StatusConflict, r.status, string(r.raw))
			require.Equal(t, "ORDER_RELEASED", r.str("error"))
		}
		// A replaced order cannot be confirmed, in Kafka mode also before
		// the consumer applied its replacement.
		c := s.do(http.MethodPost, "/vouchers/"+code+"/reservations/r-0/confirm", nil)
		require.Equal(t, http.StatusConflict, c.status, string(c.raw))
		require.Equal(t, "RESERVATION_RELEASED", c.str("error"))
		s.settle(code, 1)
		// Kafka mode: the consumer applies the replacements in order; the
		// last ones may still be on their way.
		require.Eventually(t, func() bool { return s.state(code).released == replacements }, 30*time.Second, 50*time.Millisecond)
		st := s.state(code)
		require.Equal(t, 1, st.usedCount)
		require.Equal(t, 1, st.reserved)
		s.assertConsistent(code)
	})
}

// Replacing what is not the customer's RESERVED hold on the voucher is
// REPLACED_ORDER_NOT_HELD and changes nothing; replacesOrderId equal to
// orderId is a bad request.
func TestReplaceRefusals(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 5})
		require.Equal(t, http.StatusCreated, s.reserve(code, 1, "n-1", 5000).status)
		for _, c := range []struct {
			customer        int64
			order, replaces string
		}{{2, "n-2", "n-1"}, {1, "n-3", "unknown"}} {
			r := s.replace(code, c.customer, c.order, c.replaces, 5000)
			require.Equal(t, http.StatusConflict, r.status, string(r.raw))
			require.Equal(t, "REPLACED_ORDER_NOT_HELD", r.str("error"))
		}
		r := s.replace(code, 1, "n-1", "n-1", 5000)
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
		s.settle(code, 1)
		st := s.state(code)
		require.Equal(t, 1, st.usedCount)
		require.Equal(t, 1, st.reserved)
		require.Zero(t, st.released)
		s.assertConsistent(code)
	})
}

// A confirmed order is not replaced (in Kafka mode also while the
// consumer has not applied anything: the gate knows the confirmation), and
// a replacement's new order confirmed at once, before the consumer applied
// the replacement, is the replacement: the replaced order ends RELEASED,
// one use is held for it, and the customer's next reservation is refused
// by the per-customer limit, not granted then lost.
func TestReplaceAndConfirmInEveryOrder(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 5})
		require.Equal(t, http.StatusCreated, s.reserve(code, 1, "c-1", 5000).status)
		s.confirmEventually(code, "c-1")
		r := s.replace(code, 1, "c-2", "c-1", 5000)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "REPLACED_ORDER_NOT_HELD", r.str("error"))

		require.Equal(t, http.StatusCreated, s.reserve(code, 2, "d-1", 5000).status)
		r = s.replace(code, 2, "d-2", "d-1", 5000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		s.confirmEventually(code, "d-2")
		c := s.do(http.MethodPost, "/vouchers/"+code+"/reservations/d-1/confirm", nil)
		require.Equal(t, http.StatusConflict, c.status, string(c.raw))
		require.Equal(t, "RESERVATION_RELEASED", c.str("error"))
		r = s.reserve(code, 2, "d-3", 5000)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "ALREADY_USED", r.str("error"))

		s.settle(code, 2)
		st := s.state(code)
		require.Equal(t, 2, st.usedCount)
		require.Equal(t, 2, st.confirmed)
		require.Equal(t, 1, st.released, "d-1, replaced")
		s.assertConsistent(code)
	})
}

// confirmEventually confirms orderID, retrying the 503 a Kafka-mode
// confirmation answers while the reservation is still being written.
func (s *stack) confirmEventually(code, orderID string) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+orderID+"/confirm", nil)
		if r.status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		require.Equal(s.t, http.StatusOK, r.status, string(r.raw))
		require.Equal(s.t, "CONFIRMED", r.str("status"), string(r.raw))
		return
	}
}

// A validation answers what the reservation then answers, and takes
// nothing.
func TestValidationAgreesWithReservation(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 2, MinOrderAmount: 1000})
		v := s.validate(code, map[string]any{"customerId": 1, "orderAmount": 5000})
		require.Equal(t, http.StatusOK, v.status, string(v.raw))
		require.JSONEq(t, `{"valid":true,"discountAmount":1000}`, string(v.raw))
		v = s.validate(code, map[string]any{"customerId": 1, "orderAmount": 10})
		require.JSONEq(t, `{"valid":false,"discountAmount":0,"code":"NOT_ELIGIBLE","reason":"ORDER_AMOUNT_TOO_LOW",
			"message":"order amount 10 is below the minimum 1000"}`, string(v.raw))

		require.Equal(t, http.StatusCreated, s.reserve(code, 1, "v-1", 5000).status)
		v = s.validate(code, map[string]any{"customerId": 1, "orderAmount": 5000, "orderId": "v-1"})
		require.Equal(t, true, v.body["valid"], string(v.raw))
		require.Equal(t, true, v.body["replay"], string(v.raw))
		v = s.validate(code, map[string]any{"customerId": 2, "orderAmount": 5000, "orderId": "v-1"})
		require.Equal(t, "ORDER_CONFLICT", v.str("reason"), string(v.raw))
		v = s.validate(code, map[string]any{"customerId": 1, "orderAmount": 5000, "orderId": "v-2"})
		require.Equal(t, "ALREADY_USED", v.str("reason"), string(v.raw))
		r := s.reserve(code, 1, "v-2", 5000)
		require.Equal(t, "ALREADY_USED", r.str("error"), string(r.raw))

		require.Equal(t, http.StatusCreated, s.reserve(code, 2, "v-3", 5000).status)
		v = s.validate(code, map[string]any{"customerId": 3, "orderAmount": 5000})
		require.Equal(t, false, v.body["valid"], string(v.raw))
		require.Equal(t, "HELD_OUT", v.str("reason"), string(v.raw))
		require.Positive(t, v.num("retryAfter"), string(v.raw))
		r = s.reserve(code, 3, "v-4", 5000)
		require.Equal(t, "HELD_OUT", r.str("error"), string(r.raw))

		nf := s.validate("NOSUCHCODE", map[string]any{"customerId": 1, "orderAmount": 5000})
		require.Equal(t, http.StatusNotFound, nf.status, string(nf.raw))
		require.Equal(t, "VOUCHER_NOT_FOUND", nf.str("error"))
		bad := s.validate(code, map[string]any{"customerId": 1})
		require.Equal(t, http.StatusBadRequest, bad.status, string(bad.raw))

		s.settle(code, 2)
		st := s.state(code)
		require.Equal(t, 2, st.usedCount)
		require.Equal(t, 2, st.reserved)
		s.assertConsistent(code)
	})
}

// A customer past the unknown-code limit gets 429 with Retry-After on its
// reservations and validations, of known codes too; other customers do
// not; unknown codes still answer 404 until then; the metrics count the
// look-ups and refusals by API key name.
func TestUnknownCodeGuessingAnswers429(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{tweak: func(c *Config) { c.UnknownCodeLimit = 3 }})
	code := s.createVoucher(voucherSpec{TotalLimit: 10})
	for i := range 4 {
		r := s.reserve(fmt.Sprintf("NOPE%d", i), 5, fmt.Sprintf("g-%d", i), 5000)
		require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
		require.Equal(t, "VOUCHER_NOT_FOUND", r.str("error"))
	}
	r := s.reserve(code, 5, "g-ok", 5000)
	require.Equal(t, http.StatusTooManyRequests, r.status, string(r.raw))
	require.Equal(t, "TOO_MANY_REQUESTS", r.str("error"))
	require.NotEmpty(t, r.header.Get("Retry-After"))
	v := s.validate(code, map[string]any{"customerId": 5, "orderAmount": 5000})
	require.Equal(t, http.StatusTooManyRequests, v.status, string(v.raw))

	other := s.reserve(code, 6, "g-other", 5000)
	require.Equal(t, http.StatusCreated, other.status, string(other.raw))
	st := s.state(code)
	require.Equal(t, 1, st.usedCount, "the refused customer took nothing")

	m := s.do(http.MethodGet, "/metrics", nil)
	require.Contains(t, string(m.raw), `voucherd_unknown_code_lookups_total{key=`)
	require.Contains(t, string(m.raw), `voucherd_guess_refusals_total{key=`)
	require.Contains(t, string(m.raw), `voucherd_validations_total{outcome="TOO_MANY_REQUESTS"} 1`)
}

// voucherd validate and voucherd reserve --replaces talk to the API as an
// order service would.
func TestReserveAndValidateCommands(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	code := s.createVoucher(voucherSpec{TotalLimit: 1})
	cli := func(args ...string) string {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(args[:1:1], append([]string{"--url", s.base, "--token", testAPIToken}, args[1:]...)...), &out, &errOut)
		require.NoError(t, err, errOut.String())
		return out.String()
	}
	require.Contains(t, cli("validate", "--customer", "7", "--amount", "5000", code), `"valid": true`)
	require.Contains(t, cli("reserve", "--customer", "7", "--order", "cli-1", "--amount", "5000", code), `"status": "RESERVED"`)
	require.Contains(t, cli("reserve", "--customer", "7", "--order", "cli-2", "--amount", "5000", "--replaces", "cli-1", code), `"orderId": "cli-2"`)
	require.Contains(t, cli("validate", "--customer", "7", "--amount", "5000", "--order", "cli-1", code), `"reason": "ORDER_RELEASED"`)
	require.Contains(t, cli("validate", "--customer", "8", "--amount", "5000", code), `"reason": "HELD_OUT"`)
}

// A validation answers a percentage voucher's discount computed for the
// order, as the reservation then does, and a replacement's new order gets
// the discount of its own amount.
func TestValidationAndReplacementOfPercentVoucher(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := fmt.Sprintf("Q%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
		r := s.do(http.MethodPost, "/vouchers", fmt.Sprintf(`{"code":%q,"discountPercent":12.5,"maxDiscountAmount":40000,
			"totalLimit":1,"perUserLimit":1,"startsAt":%q,"endsAt":%q,"flashSale":%t}`,
			code, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), s.opts.flash))
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		v := s.validate(code, map[string]any{"customerId": 1, "orderAmount": 120_000})
		require.Equal(t, float64(15_000), v.body["discountAmount"], string(v.raw))
		r = s.reserve(code, 1, code+"-a", 120_000)
		require.Equal(t, int64(15_000), r.num("discountAmount"), string(r.raw))
		r = s.replace(code, 1, code+"-b", code+"-a", 200_000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, int64(25_000), r.num("discountAmount"), string(r.raw))
		s.settle(code, 1)
		s.assertConsistent(code)
	})
}
