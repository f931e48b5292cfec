package benchcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/bench"
)

// The cost of events out (docs/events.md): Options.Events runs each mode's
// workload once per subscription setting, side by side, on a stack whose
// instances deliver to a receiver in this process.

// Event subscription settings of Options.Events.
const (
	// EventsNone: no webhook (confirmed and threshold events are still
	// written; reserved ones not).
	EventsNone = "none"
	// EventsConfirmed: one webhook of reservation.confirmed and
	// reservation.released.
	EventsConfirmed = "confirmed"
	// EventsReserved: one webhook of reservation.reserved too, which writes
	// an event per reservation.
	EventsReserved = "reserved"
)

var eventsOf = map[string][]string{
	EventsConfirmed: {"reservation.confirmed", "reservation.released"},
	EventsReserved:  {"reservation.reserved", "reservation.confirmed", "reservation.released"},
}

// eventsRow is one run of the comparison.
type eventsRow struct {
	name          string
	rate, p99     float64
	reserved      int64
	delivered     int
	lagP99        time.Duration
	outboxPer1000 float64
}

// receiver takes deliveries and keeps each one's lag (arrival less the
// event's createdAt).
type receiver struct {
	srv  *http.Server
	url  string
	mu   sync.Mutex
	lags []time.Duration
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/"}
	r.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var e struct {
			CreatedAt time.Time `json:"createdAt"`
		}
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		if json.Unmarshal(body, &e) == nil {
			lag := time.Since(e.CreatedAt)
			r.mu.Lock()
			r.lags = append(r.lags, lag)
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// take returns the lags received since the last call.
func (r *receiver) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lags
	r.lags = nil
	return out
}

// subscribe replaces the webhooks of the instance at base by one of the
// setting's events (none for EventsNone).
func subscribe(ctx context.Context, base, url, setting string) error {
	var page struct {
		Webhooks []struct {
			ID string `json:"id"`
		} `json:"webhooks"`
	}
	if err := adminCall(ctx, http.MethodGet, base+"/webhooks?limit=1000", nil, &page); err != nil {
		return err
	}
	for _, w := range page.Webhooks {
		if err := adminCall(ctx, http.MethodDelete, base+"/webhooks/"+w.ID, nil, nil); err != nil {
			return err
		}
	}
	events, ok := eventsOf[setting]
	if !ok {
		return nil
	}
	return adminCall(ctx, http.MethodPost, base+"/webhooks", map[string]any{"url": url, "events": events}, nil)
}

// adminCall sends a request of the admin API (a started stack has no
// tokens: loopback).
func adminCall(ctx context.Context, method, url string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func outboxSize(ctx context.Context, databaseURL string) (int64, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, "SELECT pg_total_relation_size('voucherd_event')").Scan(&n)
	return n, err
}

// checkEvents validates the settings of Options.Events.
func checkEvents(list []string) error {
	for _, s := range list {
		if s != EventsNone && eventsOf[s] == nil {
			return fmt.Errorf("--events must list none, confirmed or reserved, not %q", s)
		}
	}
	return nil
}

// runEvents runs cfg against each target once per setting of o.Events and
// writes the comparison.
func runEvents(ctx context.Context, o Options, cfg bench.Config, st *stack, targets []bench.Target, stdout, stderr io.Writer) error {
	rcv, err := startReceiver()
	if err != nil {
		return err
	}
	defer func() { _ = rcv.srv.Close() }()
	var rows []eventsRow
	var reports []*bench.Report
	for _, t := range targets {
		for _, setting := range o.Events {
			if err := subscribe(ctx, t.BaseURLs[0], rcv.url, setting); err != nil {
				return fmt.Errorf("events=%s: %w", setting, err)
			}
			before, err := outboxSize(ctx, st.databaseURL)
			if err != nil {
				return err
			}
			rcv.take()
			run := cfg
			run.Name, run.FlashSale, run.CPU = t.Name+" events="+setting, t.FlashSale, t.CPU
			run.BaseURL, run.BaseURLs = "", t.BaseURLs
			if t.Verify != nil {
				run.Verify = *t.Verify
			}
			fmt.Fprintf(stderr, "voucherd bench: %s\n", run.Name)
			rep, err := bench.Run(ctx, run)
			if rep != nil {
				reports = append(reports, rep)
			}
			if err != nil {
				return err
			}
			if !o.JSON {
				_ = rep.WriteTable(stdout)
				fmt.Fprintln(stdout)
			}
			time.Sleep(2 * time.Second) // deliveries of the run's last events
			after, err := outboxSize(ctx, st.databaseURL)
			if err != nil {
				return err
			}
			lags := rcv.take()
			slices.Sort(lags)
			row := eventsRow{name: run.Name, rate: rep.Rate, p99: rep.Latency.P99, reserved: rep.Reserved, delivered: len(lags)}
			if rep.Reserved > 0 {
				row.outboxPer1000 = float64(after-before) / float64(rep.Reserved) * 1000
			}
			if len(lags) > 0 {
				row.lagP99 = lags[(len(lags)-1)*99/100]
			}
			rows = append(rows, row)
		}
	}
	if o.JSON {
		_ = writeJSON(stdout, reports)
	}
	info := stdout
	if o.JSON {
		info = stderr
	}
	tw := tabwriter.NewWriter(info, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\treq/s\tp99\treserved\toutbox bytes/1000 uses\tdelivered\tdelivery lag p99\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%.1fms\t%d\t%.0f\t%d\t%s\t\n", r.name, r.rate, r.p99, r.reserved, r.outboxPer1000,
			r.delivered, r.lagP99.Round(time.Millisecond))
	}
	_ = tw.Flush()
	return checkInvariants(stderr, reports)
}
