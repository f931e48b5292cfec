package pgstore_test

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// BenchmarkReserveHotWindow reserves one hot voucher with a quota per
// occurrence of its windows from many clients: every use is fitted against
// and counted on the occurrence's row (the combined batch hands such a
// voucher back to be reserved one by one). Compare with
// BenchmarkReserveHotVoucher.
func BenchmarkReserveHotWindow(b *testing.B) {
	for _, clients := range []int{8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			ctx := context.Background()
			s, err := pgstore.Open(ctx, pgstore.Config{URL: testenv.Postgres(b).URL, MaxConns: int32(clients), MinConns: int32(clients)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			v := newVoucher(b, s, "HOTW", math.MaxInt32, 1, func(v *voucher.Voucher) {
				v.Schedule, v.WindowLimit = everyDay("00:00", "24:00"), math.MaxInt32
			})
			window := v.Occurrence(now).Start
			var seq atomic.Int64
			b.SetParallelism(clients)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					r := request("HOTW", n, fmt.Sprintf("bench-%d", n))
					r.Window = window
					if _, err := s.Reserve(ctx, r, now, ttl); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
		})
	}
}
