package benchcmd

import (
	"context"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/bench"
)

// warmKafka reserves on a throwaway voucher of the Kafka-mode server for d
// and prints its figures apart, so that the measured runs find the broker's
// JVM warm (a fresh broker acknowledges about a tenth as fast in its first
// seconds). It waits for the consumer to catch up afterwards.
func warmKafka(ctx context.Context, out io.Writer, base bench.Config, st *stack, d time.Duration) error {
	cfg := bench.Config{
		Name: "kafka warm-up", BaseURLs: st.groups["kafka"].urls, FlashSale: true,
		TotalLimit: 100_000_000, PerUserLimit: 1, Customers: 100_000_000, Concurrency: base.Concurrency,
		Duration: d, MaxDuration: d + 30*time.Second, Seed: base.Seed + 1_000_003,
		Verify: bench.VerifyConfig{DatabaseURL: st.databaseURL, RedisAddrs: st.redisAddrs, KeyPrefix: st.groups["kafka"].prefix, Wait: time.Minute},
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("Kafka warm-up: %w", err)
	}
	fmt.Fprintf(out, "warm-up   flash-kafka on a throwaway voucher, %s closed loop (not in the figures below): %d requests, %.0f req/s, p50 %.1fms p99 %.1fms, failures %d, verify %s\n\n",
		d, rep.Requests, rep.Rate, rep.Latency.P50, rep.Latency.P99, rep.Failures, map[bool]string{true: "OK", false: "FAILED"}[rep.OK()])
	if !rep.OK() {
		return fmt.Errorf("Kafka warm-up broke invariants: %v", rep.Violations())
	}
	return waitCaughtUp(ctx, st.kafkaLog, time.Minute)
}

// outageResult is what one mode did through a PostgreSQL outage.
type outageResult struct {
	rep *bench.Report
	err error
	// recovered is, for Kafka mode, how long after PostgreSQL's restart the
	// consumer's lag fell back to drainedLag; for sync mode, how long until
	// the database answered the server's pool again.
	recovered time.Duration
	// peakLag is the consumer's lag at the restart (Kafka mode).
	peakLag int64
}

// drainedLag is the consumer lag counted as caught up while the sale goes
// on after the outage (events keep arriving; lag 0 is a moment between two
// batches).
const drainedLag = 100

// runPGOutage runs the workload against the sync-mode and the Kafka-mode
// server at once and stops PostgreSQL from at into the run for d, then
// writes both reports to stdout (as a JSON array with asJSON) and a
// side-by-side table and the Kafka-mode stages to info.
func runPGOutage(ctx context.Context, stdout, stderr, info io.Writer, asJSON bool, cfg bench.Config, st *stack, at, d time.Duration) error {
	if cfg.Requests == 0 && cfg.Duration == 0 {
		cfg.Duration = at + d + 10*time.Second
	}
	cfg.Progress = nil
	targets := []struct {
		name string
		g    *instanceGroup
		wait time.Duration
	}{{"flash-sync", st.groups["sync"], -1}, {"flash-kafka", st.groups["kafka"], 2 * time.Minute}}
	results := make([]outageResult, len(targets))
	before := stages(ctx, st.groups["kafka"].urls)
	var wg sync.WaitGroup
	for i, t := range targets {
		c := cfg
		c.Name, c.BaseURL, c.BaseURLs, c.FlashSale = t.name, "", t.g.urls, true
		c.Verify = bench.VerifyConfig{DatabaseURL: st.databaseURL, RedisAddrs: st.redisAddrs, KeyPrefix: t.g.prefix, Wait: t.wait}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].rep, results[i].err = bench.Run(ctx, c)
		}()
	}

	outErr := func() error {
		if err := sleepCtx(ctx, at); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "voucherd bench: stopping PostgreSQL for %s\n", d)
		st.pg.Stop()
		if err := sleepCtx(ctx, d); err != nil {
			return err
		}
		if err := st.pg.Start(ctx); err != nil {
			return fmt.Errorf("restart PostgreSQL: %w", err)
		}
		restarted := time.Now()
		fmt.Fprintln(stderr, "voucherd bench: PostgreSQL started again")
		var rw sync.WaitGroup
		rw.Add(2)
		go func() {
			defer rw.Done()
			for ctx.Err() == nil && pingDatabase(ctx, st.databaseURL) != nil {
				_ = sleepCtx(ctx, 50*time.Millisecond)
			}
			results[0].recovered = time.Since(restarted)
		}()
		go func() {
			defer rw.Done()
			for ctx.Err() == nil {
				lag, err := st.kafkaLog.Lag(ctx)
				if err == nil && results[1].peakLag == 0 {
					results[1].peakLag = lag
				}
				if err == nil && lag <= drainedLag {
					break
				}
				_ = sleepCtx(ctx, 100*time.Millisecond)
			}
			results[1].recovered = time.Since(restarted)
		}()
		rw.Wait()
		return nil
	}()
	wg.Wait()

	reports := make([]*bench.Report, len(results))
	for i, r := range results {
		if r.err != nil {
			return fmt.Errorf("%s: %w", targets[i].name, r.err)
		}
		reports[i] = r.rep
		if !asJSON {
			_ = r.rep.WriteTable(stdout)
			fmt.Fprintln(stdout)
		}
	}
	if asJSON {
		_ = writeJSON(stdout, reports)
	}
	tw := tabwriter.NewWriter(info, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "PostgreSQL down %s from %s into the run\n", d, at)
	fmt.Fprintln(tw, "mode\trequests\t201 (distinct orderIds)\t503\tother failures\tp99\tafter restart\tverify")
	for i, r := range results {
		rep := r.rep
		after := fmt.Sprintf("database answers in %.1fs", r.recovered.Seconds())
		if i == 1 {
			after = fmt.Sprintf("lag %d drained to <=%d in %.1fs", r.peakLag, drainedLag, r.recovered.Seconds())
		}
		verify := "FAILED"
		if rep.OK() {
			verify = fmt.Sprintf("OK (waited %.1fs)", rep.Verification.WaitedSeconds)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1fms\t%s\t%s\n", targets[i].name, rep.Requests, rep.Reserved,
			rep.Status[503], rep.Failures-rep.Status[503], rep.Latency.P99, after, verify)
	}
	_ = tw.Flush()
	fmt.Fprintln(info)
	writeStages(info, "flash-kafka", before, stages(ctx, st.groups["kafka"].urls))
	if outErr != nil {
		return outErr
	}
	for _, r := range results {
		if !r.rep.OK() {
			return ErrInvariants
		}
	}
	return nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pingDatabase succeeds when PostgreSQL at url accepts a new connection.
func pingDatabase(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
}
