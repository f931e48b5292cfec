package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A chain of replacements cannot hold a use past MaxHold from its first
// hold, in every mode: each replacement's expiry, and an extension of one,
// stop at the first hold's start plus MaxHold; a replacement after that is
// refused, and the use comes free for another customer.
func TestReplacementChainBoundedByMaxHold(t *testing.T) {
	t.Parallel()
	const ttl, maxHold = 4 * time.Second, 6 * time.Second
	for _, m := range modesWith(func(c *Config) { c.MaxHold = maxHold }) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			opts := m.opts
			opts.ttl = ttl
			s := newStack(t, opts)
			code := s.createVoucher(voucherSpec{TotalLimit: 1})
			expiry := func(r response) time.Time {
				t.Helper()
				require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.status, string(r.raw))
				at, err := time.Parse(time.RFC3339Nano, r.str("expiresAt"))
				require.NoError(t, err)
				return at
			}
			const slack = 10 * time.Millisecond
			start := expiry(s.reserve(code, 1, "chain-a", 5000)).Add(-ttl)
			bound := start.Add(maxHold)
			s.settle(code, 1)

			// Past MaxHold-TTL from the start, a fresh TTL would reach past
			// the bound: each link stops at it.
			time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
			b := expiry(s.replace(code, 1, "chain-b", "chain-a", 5000))
			require.WithinRange(t, b, bound.Add(-slack), bound.Add(slack), "the first replacement stops at start + MaxHold")
			s.settle(code, 1)
			ext := expiry(s.extend(code, "chain-b", map[string]any{"seconds": 60}))
			require.WithinRange(t, ext, bound.Add(-slack), bound.Add(slack), "an extension stops there too")

			time.Sleep(time.Until(start.Add(3500 * time.Millisecond)))
			c := expiry(s.replace(code, 1, "chain-c", "chain-b", 5000))
			require.WithinRange(t, c, bound.Add(-slack), bound.Add(slack), "so does the next link")
			s.settle(code, 1)
			got := s.do(http.MethodGet, "/vouchers/"+code+"/reservations/chain-c", nil)
			require.WithinRange(t, expiry(got), bound.Add(-slack), bound.Add(slack), "as the store has it")

			// Once the bound has passed, the chain cannot go on, and the use
			// comes free.
			time.Sleep(time.Until(bound.Add(300 * time.Millisecond)))
			d := s.replace(code, 1, "chain-d", "chain-c", 5000)
			require.Equal(t, http.StatusConflict, d.status, string(d.raw))
			require.Equal(t, "REPLACED_ORDER_NOT_HELD", d.str("error"))
			require.Eventually(t, func() bool {
				return s.reserve(code, 2, "other-1", 5000).status == http.StatusCreated
			}, 10*time.Second, 100*time.Millisecond, "another customer gets the use once the chain's hold expired")
			s.settle(code, 1)
			s.assertConsistent(code)
		})
	}
}
