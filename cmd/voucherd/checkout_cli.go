package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"

	"github.com/voucherd/voucherd/client"
)

// orderFlags are the flags of the order-service commands (reserve,
// validate): the API's URL and the reservation routes' token.
type orderFlags struct {
	url, token      string
	customer, order string
	amount          int64
	currency        string
}

func registerOrderFlags(fs *flag.FlagSet, f *orderFlags) {
	addr := envOr("VOUCHERD_ADDR", "127.0.0.1:8080")
	fs.StringVar(&f.url, "url", envOr("VOUCHERD_URL", "http://"+addr), "voucherd base URL (VOUCHERD_URL)")
	fs.StringVar(&f.token, "token", "", "API token (default: VOUCHERD_API_TOKEN)")
	fs.StringVar(&f.customer, "customer", "", "customerId (required): 1-64 characters of A-Z a-z 0-9 . _ : - @ +")
	fs.Int64Var(&f.amount, "amount", 0, "order amount in minor units")
	fs.StringVar(&f.currency, "currency", "", "ISO 4217 currency of the amount (EUR); a voucher with a currency requires it")
}

func (f orderFlags) client() *client.Client {
	token := f.token
	if token == "" {
		token = os.Getenv("VOUCHERD_API_TOKEN")
	}
	return client.New(f.url, token, client.WithMaxAttempts(2))
}

// runReserve reserves a use for an order, optionally replacing the
// customer's earlier hold, and prints the reservation as JSON.
func runReserve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f orderFlags
	fs := newFlagSet("reserve", "[flags] CODE", stderr)
	registerOrderFlags(fs, &f)
	fs.StringVar(&f.order, "order", "", "orderId (required)")
	replaces := fs.String("replaces", "", "orderId of the customer's RESERVED hold on this voucher to take the use over from (a retry after a failed payment)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 1 || f.customer == "" || f.order == "" {
		return errors.New("usage: voucherd reserve --customer ID --order ORDER [--amount N] [--currency CUR] [--replaces ORDER] CODE [CODE...]")
	}
	if fs.NArg() > 1 {
		if *replaces != "" {
			return errors.New("--replaces takes one code")
		}
		st, err := f.client().ReserveStack(ctx, client.StackRequest{CustomerID: f.customer, OrderID: f.order,
			OrderAmount: f.amount, Codes: fs.Args(), Currency: f.currency})
		if err != nil {
			return err
		}
		return writeIndented(stdout, st)
	}
	r, err := f.client().Reserve(ctx, fs.Arg(0), client.ReserveRequest{CustomerID: f.customer, OrderID: f.order,
		OrderAmount: f.amount, ReplacesOrderID: *replaces, Currency: f.currency})
	if err != nil {
		return err
	}
	return writeIndented(stdout, r)
}

// runValidate prints, as JSON, what a reservation would answer now.
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f orderFlags
	fs := newFlagSet("validate", "[flags] CODE", stderr)
	registerOrderFlags(fs, &f)
	fs.StringVar(&f.order, "order", "", "orderId (optional)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 1 || f.customer == "" {
		return errors.New("usage: voucherd validate --customer ID [--amount N] [--currency CUR] [--order ORDER] CODE [CODE...]")
	}
	if fs.NArg() > 1 {
		if f.order != "" {
			return errors.New("--order takes one code")
		}
		v, err := f.client().ValidateStack(ctx, client.StackRequest{CustomerID: f.customer,
			OrderAmount: f.amount, Codes: fs.Args(), Currency: f.currency})
		if err != nil {
			return err
		}
		return writeIndented(stdout, v)
	}
	v, err := f.client().Validate(ctx, fs.Arg(0), client.ValidateRequest{CustomerID: f.customer, OrderID: f.order,
		OrderAmount: f.amount, Currency: f.currency})
	if err != nil {
		return err
	}
	return writeIndented(stdout, v)
}

// runOrder acts on an order that presented several codes: order
// get|confirm|release|extend ORDER.
func runOrder(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: voucherd order get|confirm|release|extend [--seconds N] ORDER"
	if len(args) == 0 {
		return errors.New(usage)
	}
	var f orderFlags
	fs := newFlagSet("order "+args[0], "[flags] ORDER", stderr)
	addr := envOr("VOUCHERD_ADDR", "127.0.0.1:8080")
	fs.StringVar(&f.url, "url", envOr("VOUCHERD_URL", "http://"+addr), "voucherd base URL (VOUCHERD_URL)")
	fs.StringVar(&f.token, "token", "", "API token (default: VOUCHERD_API_TOKEN)")
	seconds := fs.Int("seconds", 600, "extend: seconds from now")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New(usage)
	}
	c, order := f.client(), fs.Arg(0)
	var st *client.Stack
	var err error
	switch args[0] {
	case "get":
		st, err = c.GetStack(ctx, order)
	case "confirm":
		st, err = c.ConfirmStack(ctx, order)
	case "release":
		st, err = c.ReleaseStack(ctx, order)
	case "extend":
		st, err = c.ExtendStack(ctx, order, *seconds)
	default:
		return errors.New(usage)
	}
	if err != nil {
		return err
	}
	return writeIndented(stdout, st)
}
