package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// runReconcile reconciles one flash voucher, or all live ones, directly
// against PostgreSQL and Redis with the serve configuration.
func runReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := newFlagSet("reconcile", "[CODE]", stderr)
	// One pass that never migrates, opens connections on demand and logs
	// warnings as text: those flags are left out.
	registerServeFlagsExcept(fs, &cfg, "migrate", "db-min-conns", "log-format", "log-level")
	dryRun := fs.Bool("dry-run", false, "report only; make no repairs")
	asJSON := fs.Bool("json", false, "print JSON reports")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(cfg.RedisAddrs) == 0 {
		return fmt.Errorf("reconcile needs VOUCHERD_REDIS_ADDR: there is nothing to reconcile without Redis")
	}
	cfg.MigrateOnStart = false
	cfg.MinDBConns = 0 // one pass: connections on demand
	log, err := newLogger(stderr, "text", "warn")
	if err != nil {
		return err
	}
	app, err := NewApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer app.Close() //nolint:errcheck // after the pass is done and reported, a failed close changes nothing in it
	var reports []voucher.ReconcileReport
	if fs.NArg() == 1 {
		rep, err := app.svc.Reconcile(ctx, fs.Arg(0), !*dryRun, cfg.ReconcileGrace)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
	} else {
		if reports, err = app.svc.ReconcileAll(ctx, !*dryRun, cfg.ReconcileGrace, 24*time.Hour); err != nil {
			return err
		}
	}
	if *asJSON {
		return writeIndented(stdout, reports)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tLOADED\tREDIS REMAINING\tEXPECTED\tDRIFT\tORPHANS\tSTALE\tMISSING\tIN FLIGHT\tREPAIRED\tNOTE")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%s\n", r.Code, r.Loaded, r.RedisRemaining,
			r.ExpectedRemaining, r.Drift, r.Found.Orphans, r.Found.Stale, r.Found.Missing, r.Found.InFlight, r.Repaired, r.Skipped)
	}
	return tw.Flush()
}
