package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/require"
)

// BenchmarkUnknownVersusExpiredCode measures, side by side in one loop, the
// latency a caller sees for a reservation of a code that does not exist
// (404, a new code every time, as an enumeration would send) and of an
// existing code whose window has ended (422), through HTTP on loopback, in
// standard and flash-sync mode. The code-guessing limit is off so that one
// customer may send them all. It reports the median and p99 of each in
// microseconds; equal distributions mean a caller cannot tell the two
// apart by timing.
func BenchmarkUnknownVersusExpiredCode(b *testing.B) {
	for _, m := range modes[:2] {
		b.Run(m.name, func(b *testing.B) {
			opts := m.opts
			opts.tweak = func(c *Config) { c.UnknownCodeLimit = -1 }
			s := newStack(b, opts)
			expired := s.createEndedVoucher()
			unknown := hdrhistogram.New(1, 10_000_000, 3)
			known := hdrhistogram.New(1, 10_000_000, 3)
			send := func(code string, i int, want int) time.Duration {
				body := fmt.Sprintf(`{"customerId":%d,"orderId":"g-%d","orderAmount":5000}`, 1+i%1000, i)
				req, err := http.NewRequest(http.MethodPost, s.base+"/vouchers/"+code+"/reservations", bytes.NewBufferString(body))
				require.NoError(b, err)
				req.Header.Set("Authorization", "Bearer "+testAPIToken)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := httpClient.Do(req)
				require.NoError(b, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				d := time.Since(start)
				resp.Body.Close()
				require.Equal(b, want, resp.StatusCode)
				return d
			}
			// Warm the connection and the voucher cache.
			for i := range 50 {
				send(fmt.Sprintf("NX%d", i), i, http.StatusNotFound)
				send(expired, i, http.StatusUnprocessableEntity)
			}
			b.ResetTimer()
			for i := range b.N {
				// Alternate which goes first, so neither always follows the other.
				if i%2 == 0 {
					_ = unknown.RecordValue(send(fmt.Sprintf("NX%dX%d", time.Now().UnixNano(), i), i, http.StatusNotFound).Microseconds())
					_ = known.RecordValue(send(expired, i, http.StatusUnprocessableEntity).Microseconds())
				} else {
					_ = known.RecordValue(send(expired, i, http.StatusUnprocessableEntity).Microseconds())
					_ = unknown.RecordValue(send(fmt.Sprintf("NX%dX%d", time.Now().UnixNano(), i), i, http.StatusNotFound).Microseconds())
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(unknown.ValueAtQuantile(50)), "unknown-p50-µs")
			b.ReportMetric(float64(unknown.ValueAtQuantile(99)), "unknown-p99-µs")
			b.ReportMetric(float64(known.ValueAtQuantile(50)), "expired-p50-µs")
			b.ReportMetric(float64(known.ValueAtQuantile(99)), "expired-p99-µs")
		})
	}
}
