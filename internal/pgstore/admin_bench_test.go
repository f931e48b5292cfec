package pgstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// The benchmark's data set: benchVouchers vouchers V0000000..V0999999 and
// benchRedemptions redemptions. One voucher in 100 is hot (hotVoucher holds
// one redemption in 100) and one customer too (hotCustomer holds one in
// 1000), so their listings have many pages.
const (
	benchVouchers    = 1_000_000
	benchRedemptions = 10_000_000
	hotVoucher       = "V0000042"
	hotCustomer      = 1
)

// benchNow is the instant the states are computed at.
var benchNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// buildDataSet fills a migrated, empty database with the benchmark's data
// set in a few set-based statements: the redemption table's secondary indexes
// and foreign key are dropped during the load and built again after it.
func buildDataSet(b *testing.B, s *pgstore.Store) {
	ctx := context.Background()
	// One connection, so that its settings apply to every step.
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	exec := func(what, sql string, args ...any) {
		start := time.Now()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		b.Logf("%-32s %6.1fs", what, time.Since(start).Seconds())
	}
	rows, err := conn.Query(ctx, `SELECT indexdef FROM pg_indexes
		WHERE tablename = 'voucher_redemption' AND indexname <> 'voucher_redemption_pkey'`)
	if err != nil {
		b.Fatal(err)
	}
	var indexes []string
	for rows.Next() {
		var def string
		if err := rows.Scan(&def); err != nil {
			b.Fatal(err)
		}
		indexes = append(indexes, def)
	}
	if rows.Err() != nil {
		b.Fatal(rows.Err())
	}
	exec("maintenance_work_mem", `SET maintenance_work_mem = '256MB'`)
	exec("drop redemption indexes", `DO $$ DECLARE i text; BEGIN
		FOR i IN SELECT indexname FROM pg_indexes WHERE tablename = 'voucher_redemption' AND indexname <> 'voucher_redemption_pkey'
		LOOP EXECUTE 'DROP INDEX ' || i; END LOOP;
		ALTER TABLE voucher_redemption DROP CONSTRAINT voucher_redemption_voucher_fkey; END $$`)
	// 1% disabled, 10% scheduled, 20% active, the rest ended; 2% flash.
	exec("1,000,000 vouchers", `
		INSERT INTO voucher (code, discount_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale, disabled)
		SELECT 'V' || lpad(i::text, 7, '0'), 100, 1000000, 1000000,
		       CASE WHEN i % 100 BETWEEN 1 AND 10 THEN $1::timestamptz + (i % 100000) * interval '1 minute'
		            WHEN i % 100 BETWEEN 11 AND 30 THEN $1::timestamptz - interval '1 day'
		            ELSE $1::timestamptz - interval '400 days' END,
		       CASE WHEN i % 100 BETWEEN 1 AND 10 THEN $1::timestamptz + interval '400 days'
		            WHEN i % 100 BETWEEN 11 AND 30 THEN $1::timestamptz + interval '1 hour' + (i % 100000) * interval '1 minute'
		            ELSE $1::timestamptz - interval '1 hour' - (i % 100000) * interval '1 minute' END,
		       i % 50 = 7, i % 100 = 0
		FROM generate_series(0, $2 - 1) AS i`, benchNow, benchVouchers)
	exec("10,000,000 redemptions", `
		INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status,
		                                created_at, updated_at, expires_at)
		SELECT 'o' || j,
		       CASE WHEN j % 100 = 0 THEN $3 ELSE 'V' || lpad(((j * 7919) % $2)::text, 7, '0') END,
		       CASE WHEN j % 1000 = 0 THEN $4 ELSE j % 2000000 + 2 END,
		       1000, 100,
		       CASE WHEN j % 10 < 6 THEN 'CONFIRMED' WHEN j % 10 < 8 THEN 'RESERVED' ELSE 'RELEASED' END,
		       $1::timestamptz - interval '100 days' + j * interval '500 microseconds',
		       $1::timestamptz - interval '100 days' + j * interval '500 microseconds',
		       $1::timestamptz - interval '100 days' + j * interval '500 microseconds' + interval '15 minutes'
		FROM generate_series(1::bigint, $5) AS j`, benchNow, benchVouchers, hotVoucher, hotCustomer, benchRedemptions)
	exec("1,010,000 audit entries", `
		INSERT INTO voucher_audit (voucher_code, action, key_name, after)
		SELECT code, 'create', 'bench', '{}'::jsonb FROM voucher
		UNION ALL
		SELECT $1, 'patch', 'bench', '{}'::jsonb FROM generate_series(1, 10000)`, hotVoucher)
	for _, def := range indexes {
		exec(def[len("CREATE INDEX "):][:30], def)
	}
	exec("foreign key", `ALTER TABLE voucher_redemption ADD CONSTRAINT voucher_redemption_voucher_fkey
		FOREIGN KEY (voucher_code) REFERENCES voucher (code) NOT VALID`)
	exec("vacuum analyze", `VACUUM ANALYZE voucher, voucher_redemption, voucher_audit`)
}

// BenchmarkAdminListings measures one page of 100 of each listing on a
// database of 1,000,000 vouchers and 10,000,000 redemptions, which it builds
// first (logging how long each step took). Each sub-benchmark walks its
// listing page after page, from the first page again at the end, and
// reports the latency of a page as p50-ms and p99-ms. Run with:
//
//	go test -run '^$' -bench AdminListings -benchtime 2000x -timeout 60m ./internal/pgstore/
func BenchmarkAdminListings(b *testing.B) {
	ctx := context.Background()
	pg := testenv.Postgres(b)
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	buildDataSet(b, s)
	b.Logf("data set built in %.1fs", time.Since(start).Seconds())
	for _, c := range listingCases() {
		b.Logf("plan of %s:\n%s", c.name, plan(b, s, c, benchNow))
	}
	for _, c := range listingCases() {
		b.Run(c.name, func(b *testing.B) {
			h := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
			after, rows, pages := "", 0, 0
			for b.Loop() {
				t0 := time.Now()
				var next string
				var n int
				if c.vouchers != nil {
					f := *c.vouchers
					f.After = after
					p, err := s.ListVouchers(ctx, f, benchNow)
					if err != nil {
						b.Fatal(err)
					}
					next, n = p.Next, len(p.Vouchers)
				} else {
					f := *c.redemption
					f.After = after
					p, err := s.ListRedemptions(ctx, f)
					if err != nil {
						b.Fatal(err)
					}
					next, n = p.Next, len(p.Redemptions)
				}
				_ = h.RecordValue(time.Since(t0).Microseconds())
				rows += n
				pages++
				after = next
			}
			b.ReportMetric(float64(h.ValueAtQuantile(50))/1000, "p50-ms")
			b.ReportMetric(float64(h.ValueAtQuantile(99))/1000, "p99-ms")
			b.ReportMetric(float64(rows)/float64(pages), "rows/page")
		})
	}
	b.Run("audit", func(b *testing.B) {
		h := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
		after := ""
		for b.Loop() {
			t0 := time.Now()
			p, err := s.Audit(ctx, hotVoucher, voucher.PageRequest{Limit: 100, After: after})
			if err != nil {
				b.Fatal(err)
			}
			_ = h.RecordValue(time.Since(t0).Microseconds())
			after = p.Next
		}
		b.ReportMetric(float64(h.ValueAtQuantile(50))/1000, "p50-ms")
		b.ReportMetric(float64(h.ValueAtQuantile(99))/1000, "p99-ms")
	})
}

// BenchmarkReserveListingIndexes measures what the listings' redemption
// indexes cost the reservation path: reservations spread over 1,000 vouchers
// (no hot row), 16 clients, with the indexes as migrated and with the index
// set of before the listings (voucher_redemption_code_status_idx instead of
// the four listing indexes), alternately in one invocation:
//
//	go test -run '^$' -bench ReserveListingIndexes -benchtime 20000x -count 3 ./internal/pgstore/
func BenchmarkReserveListingIndexes(b *testing.B) {
	for _, variant := range []string{"listing-indexes", "indexes-before"} {
		b.Run(variant, func(b *testing.B) {
			ctx := context.Background()
			pg := testenv.Postgres(b)
			s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 16, MinConns: 16})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			if variant == "indexes-before" {
				if _, err := s.Pool().Exec(ctx, `
					DROP INDEX voucher_redemption_code_created_idx, voucher_redemption_code_status_created_idx,
					           voucher_redemption_customer_created_idx, voucher_redemption_code_customer_created_idx;
					CREATE INDEX voucher_redemption_code_status_idx ON voucher_redemption (voucher_code, status)`); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := s.Pool().Exec(ctx, `
				INSERT INTO voucher (code, discount_amount, total_limit, per_user_limit, starts_at, ends_at)
				SELECT 'S' || i, 100, 1000000, 1000000, $1, $2 FROM generate_series(0, 999) AS i`,
				base, base.Add(30*24*time.Hour)); err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					code := fmt.Sprintf("S%d", n%1000)
					if _, err := s.Reserve(ctx, request(code, n, fmt.Sprintf("r-%d", n)), now, ttl); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
		})
	}
}
