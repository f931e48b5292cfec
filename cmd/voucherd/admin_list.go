package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/voucherd/voucherd/client"
)

// voucherAdminNames lists the subcommands of voucherAdminCommands for usage
// lines.
const voucherAdminNames = "list, reservations, audit, activate, deactivate"

// voucherAdminCommands are the voucher subcommands of administration; each
// gets the subcommand's flag set with the admin flags registered.
var voucherAdminCommands = map[string]func(ctx context.Context, fs *flag.FlagSet, f *adminFlags, args []string, stdout io.Writer) error{
	"list":         runVoucherList,
	"reservations": runVoucherReservations,
	"audit":        runVoucherAudit,
	"activate": func(ctx context.Context, fs *flag.FlagSet, f *adminFlags, args []string, stdout io.Writer) error {
		return runSetActive(ctx, fs, f, args, stdout, true)
	},
	"deactivate": func(ctx context.Context, fs *flag.FlagSet, f *adminFlags, args []string, stdout io.Writer) error {
		return runSetActive(ctx, fs, f, args, stdout, false)
	},
}

// pageFlags are the paging flags of the listings: one page after --after,
// or every page with --all.
type pageFlags struct {
	limit int
	after string
	all   bool
}

func registerPageFlags(fs *flag.FlagSet, p *pageFlags) {
	fs.IntVar(&p.limit, "limit", 0, "rows per page (server default 100, at most 1000)")
	fs.StringVar(&p.after, "after", "", "cursor of the page to start after (the next of the previous page)")
	fs.BoolVar(&p.all, "all", false, "follow the cursors to the last page")
}

// walk calls fetch for one page, or every page with --all, and prints each;
// without --all it prints the cursor of the next page, if any.
func walk(p pageFlags, stdout io.Writer, fetch func(after string) (next string, err error)) error {
	after := p.after
	for {
		next, err := fetch(after)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		if !p.all {
			fmt.Fprintf(stdout, "next: %s\n", next)
			return nil
		}
		after = next
	}
}

func runVoucherList(ctx context.Context, fs *flag.FlagSet, f *adminFlags, args []string, stdout io.Writer) error {
	var p pageFlags
	registerPageFlags(fs, &p)
	var q client.VoucherQuery
	fs.StringVar(&q.State, "state", "", "active, scheduled, ended or disabled")
	flash := fs.String("flash", "", "true: flash sales only; false: no flash sales")
	fs.StringVar(&q.CodePrefix, "prefix", "", "codes starting with this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *flash != "" {
		b, err := strconv.ParseBool(*flash)
		if err != nil {
			return fmt.Errorf("--flash must be true or false")
		}
		q.FlashSale = &b
	}
	c := f.client()
	return walk(p, stdout, func(after string) (string, error) {
		q.Page = client.Page{Limit: p.limit, After: after}
		page, err := c.ListVouchers(ctx, q)
		if err != nil {
			return "", err
		}
		if f.json {
			return page.Next, writeIndented(stdout, page)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CODE\tACTIVE\tFLASH\tSTARTS\tENDS\tRESERVED\tCONFIRMED\tREMAINING")
		for _, v := range page.Vouchers {
			fmt.Fprintf(tw, "%s\t%v\t%v\t%s\t%s\t%d\t%d\t%d\n", v.Code, v.Active, v.FlashSale,
				v.StartsAt.UTC().Format(time.RFC3339), v.EndsAt.UTC().Format(time.RFC3339), v.Reserved, v.Confirmed, v.Remaining)
		}
		return page.Next, tw.Flush()
	})
}

func printRedemptions(stdout io.Writer, list []client.Redemption) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER\tVOUCHER\tCUSTOMER\tSTATUS\tAMOUNT\tDISCOUNT\tCREATED\tEXPIRES")
	for _, r := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.OrderID, r.VoucherCode, r.CustomerID, r.Status,
			r.OrderAmount, r.DiscountAmount, r.CreatedAt.UTC().Format(time.RFC3339), r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func oneCode(fs *flag.FlagSet, usage string) (string, error) {
	if fs.NArg() != 1 {
		return "", errors.New("usage: voucherd voucher " + usage)
	}
	return fs.Arg(0), nil
}

func runVoucherReservations(ctx context.Context, fs *flag.FlagSet, f *adminFlags, args []string, stdout io.Writer) error {
	var p pageFlags
	registerPageFlags(fs, &p)
	var q client.ReservationQuery
	fs.StringVar(&q.Status, "status", "", "RESERVED, CONFIRMED or RELEASED")
	fs.StringVar(&q.CustomerID, "customer", "", "one customer's reservations only (its customerId)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	code, err := oneCode(fs, "reservations [flags] CODE")
	if err != nil {
		return err
	}
	c := f.client()
	return walk(p, stdout, func(after string) (string, error) {
		q.Page = client.Page{Limit: p.limit, After: after}
		page, err := c.ListReservations(ctx, code, q)
		if err != nil {
			return "", err
		}
		if f.json {
			return page.Next, writeIndented(stdout, page)
		}
		return page.Next, printRedemptions(stdout, page.Reservations)
	})
}

func runVoucherAudit(ctx context.Context, fs *flag.FlagSet, f *adminFlags, args []string, stdout io.Writer) error {
	var p pageFlags
	registerPageFlags(fs, &p)
	if err := fs.Parse(args); err != nil {
		return err
	}
	code, err := oneCode(fs, "audit [flags] CODE")
	if err != nil {
		return err
	}
	c := f.client()
	return walk(p, stdout, func(after string) (string, error) {
		page, err := c.Audit(ctx, code, client.Page{Limit: p.limit, After: after})
		if err != nil {
			return "", err
		}
		if f.json {
			return page.Next, writeIndented(stdout, page)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tACTION\tKEY\tBEFORE\tAFTER")
		for _, e := range page.Entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), e.Action, e.KeyName, e.Before, e.After)
		}
		return page.Next, tw.Flush()
	})
}

func runSetActive(ctx context.Context, fs *flag.FlagSet, f *adminFlags, args []string, stdout io.Writer, active bool) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	name := "deactivate"
	if active {
		name = "activate"
	}
	code, err := oneCode(fs, name+" CODE")
	if err != nil {
		return err
	}
	c := f.client()
	var v *client.Voucher
	if active {
		v, err = c.Activate(ctx, code)
	} else {
		v, err = c.Deactivate(ctx, code)
	}
	if err != nil {
		return err
	}
	return printVoucher(stdout, f.json, v)
}

func runCustomer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "redemptions" {
		fmt.Fprintln(stderr, "Usage: voucherd customer redemptions [flags] CUSTOMER_ID")
		return errors.New("customer needs the subcommand redemptions")
	}
	var f adminFlags
	var p pageFlags
	fs := newFlagSet("customer", "redemptions [flags] CUSTOMER_ID", stderr)
	registerAdminFlags(fs, &f)
	registerPageFlags(fs, &p)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: voucherd customer redemptions [flags] CUSTOMER_ID")
	}
	// The server checks the id (400 for a malformed one).
	id := fs.Arg(0)
	c := f.client()
	return walk(p, stdout, func(after string) (string, error) {
		page, err := c.CustomerRedemptions(ctx, id, client.Page{Limit: p.limit, After: after})
		if err != nil {
			return "", err
		}
		if f.json {
			return page.Next, writeIndented(stdout, page)
		}
		return page.Next, printRedemptions(stdout, page.Redemptions)
	})
}
