//go:build !race

package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRefusalAllocations: a refusal of a sold-out flash voucher, through
// the whole served handler, allocates at most what is left of it on
// purpose: the per-request state of the handler wrapper, the orderId, and
// net/http's path match. (Not under the race detector, which allocates on
// its own; and not parallel: testing.AllocsPerRun refuses.)
func TestRefusalAllocations(t *testing.T) {
	h, soldOut, _, _ := handlerStack(t)
	req := newBenchRequest(t, http.MethodPost, "/vouchers/"+soldOut+"/reservations")
	w := &discardWriter{h: http.Header{}}
	n := time.Now().UnixNano() / 1000 % 1_000_000_000 * 1_000_000
	allocs := testing.AllocsPerRun(1000, func() {
		n++
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, req.reserve(n, 5000))
		if w.status != http.StatusConflict {
			t.Fatalf("status %d", w.status)
		}
	})
	require.LessOrEqual(t, allocs, 3.0)
	require.NotEmpty(t, w.h.Get("Retry-After"), "HELD_OUT carries Retry-After")
	require.NotEmpty(t, w.h.Get("X-Request-Id"))
}
