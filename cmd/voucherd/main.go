// Command voucherd hands out limited-use discount vouchers and never
// oversells. Run `voucherd help` for the subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	// The IANA time zone database, embedded: vouchers' schedules name zones
	// (voucher.Schedule), and an image without /usr/share/zoneinfo must
	// resolve them as one with it does.
	_ "time/tzdata"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"serve":     {"run the HTTP API, the expiry job and (in Kafka mode) the consumer", runServe},
		"migrate":   {"apply the database migrations and exit", runMigrate},
		"dev":       {"start PostgreSQL, Redis (and Kafka with --kafka) as children, migrate and serve", runDev},
		"consume":   {"run only the Kafka consumer that writes reservations to PostgreSQL", runConsume},
		"warmup":    {"load a flash voucher into Redis (through the HTTP API)", runWarmup},
		"voucher":   {"administer vouchers (through the HTTP API): voucher create|get|patch|list|reservations|audit|activate|deactivate", runVoucher},
		"reserve":   {"reserve a use for an order (several codes: all or none), optionally replacing the customer's hold (through the HTTP API)", runReserve},
		"validate":  {"what a reservation would answer now, taking nothing (through the HTTP API)", runValidate},
		"order":     {"an order of several codes, all at once (through the HTTP API): order get|confirm|release|extend ORDER", runOrder},
		"campaign":  {"campaigns of unique codes sharing one budget (through the HTTP API): campaign create|get|codes|add-codes|import", runCampaign},
		"customer":  {"a customer's redemptions of every voucher (through the HTTP API): customer redemptions ID", runCustomer},
		"webhook":   {"signed event deliveries (through the HTTP API): webhook create|list|get|update|delete|deliveries", runWebhook},
		"events":    {"the event feed, one event a line (through the HTTP API)", runEvents},
		"reconcile": {"compare Redis with PostgreSQL for flash vouchers and repair safe drift", runReconcile},
		"bench":     {"run a flash-sale load test and verify the invariants", runBench},
		"version":   {"print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, errorLine(err))
		}
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(int(exit))
		}
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(1)
	}
}

// exitError asks main for a specific exit status.
// errorLine is the line main prints for err: its message after
// "voucherd: ", once (the client's errors begin with it already).
func errorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "voucherd: ") {
		return msg
	}
	return "voucherd: " + msg
}

type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		usage(stderr)
		return fmt.Errorf("unknown command %q", args[0])
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "voucherd — limited-use discount vouchers that never oversell")
	fmt.Fprintln(w, "\nUsage: voucherd <command> [flags]   (voucherd <command> --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nConfiguration comes from flags and VOUCHERD_* environment variables (see README.md).")
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "voucherd", version)
	return nil
}

func newFlagSet(name, usageLine string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: voucherd %s [flags] %s\n\n%s\n\nFlags:\n", name, usageLine, commands[name].summary)
		fs.PrintDefaults()
		switch name {
		case "serve", "dev":
			fmt.Fprint(stderr, envOnlyHelp)
		case "consume":
			fmt.Fprint(stderr, managedEnvHelp)
		}
	}
	return fs
}
