package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/voucherd/voucherd/client"
)

// campaignBatch is how many codes the CLI asks for per request, so that it
// can show progress.
const campaignBatch = 10_000

func runCampaign(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "Usage: voucherd campaign create|get|codes|add-codes|import [flags]   (voucherd campaign create --help)")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return flag.ErrHelp
		}
		return errors.New("campaign needs a subcommand: create, get, codes, add-codes, import")
	}
	sub, args := args[0], args[1:]
	var f adminFlags
	fs := newFlagSet("campaign", sub+" ...", stderr)
	registerAdminFlags(fs, &f)
	switch sub {
	case "create":
		var n client.NewCampaign
		var starts, ends string
		fs.StringVar(&n.Name, "name", "", "campaign name (required)")
		count := fs.Int("codes", 0, "number of codes to generate")
		fs.StringVar(&n.CodePrefix, "prefix", "", "code prefix (at most 16 of A-Z a-z 0-9 _ -)")
		fs.IntVar(&n.CodeLength, "length", 0, "random characters per code, 6-16 (default 10)")
		fs.Int64Var(&n.DiscountAmount, "discount", 0, "discount amount in minor units (required)")
		fs.Int64Var(&n.MinOrderAmount, "min-order", 0, "minimum order amount in minor units")
		total := fs.Int("total", 0, "total uses across all codes (required)")
		perUser := fs.Int("per-user", 1, "uses one customer may hold across all codes")
		fs.StringVar(&starts, "starts", "", "start, RFC 3339 (default now)")
		fs.StringVar(&ends, "ends", "", "end, RFC 3339 (default the start + 30 days); it must not be past")
		fs.BoolVar(&n.FlashSale, "flash", false, "gate the codes' reservations in Redis (a flash campaign)")
		fs.StringVar(&n.Currency, "currency", "", "ISO 4217 currency (EUR) every code's reservations must name (default any)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		var err error
		if n.TotalLimit, err = int32Setting("total", *total); err != nil {
			return err
		}
		if n.PerUserLimit, err = int32Setting("per-user", *perUser); err != nil {
			return err
		}
		if n.StartsAt, err = parseTimeOr(starts, time.Now()); err != nil {
			return err
		}
		if n.EndsAt, err = parseTimeOr(ends, n.StartsAt.Add(30*24*time.Hour)); err != nil {
			return err
		}
		start := time.Now()
		c, err := f.client().CreateCampaignCodes(ctx, n, *count, campaignBatch, progressLine(stderr, *count, start))
		if err != nil {
			return err
		}
		return printCampaign(stdout, f.json, c)
	case "add-codes":
		count := fs.Int("codes", 0, "number of codes to add (required)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 || *count <= 0 {
			return errors.New("usage: voucherd campaign add-codes --codes N ID")
		}
		cl := f.client()
		show := progressLine(stderr, *count, time.Now())
		var c *client.Campaign
		for made := 0; made < *count; {
			k := min(*count-made, campaignBatch)
			var err error
			if c, err = cl.AddCampaignCodes(ctx, fs.Arg(0), k); err != nil {
				return fmt.Errorf("%d of %d codes added: %w", made, *count, err)
			}
			made += k
			show(made)
		}
		return printCampaign(stdout, f.json, c)
	case "import":
		batch := fs.Int("batch", client.MaxImportCodes, "codes per request, 1 to 10000")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 2 || *batch < 1 || *batch > client.MaxImportCodes {
			return errors.New("usage: voucherd campaign import [--batch N] ID FILE.csv   (FILE - reads stdin)")
		}
		return importCodes(ctx, f.client(), fs.Arg(0), fs.Arg(1), *batch, stdout, stderr)
	case "get":
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: voucherd campaign get ID")
		}
		c, err := f.client().GetCampaign(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		return printCampaign(stdout, f.json, c)
	case "codes":
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: voucherd campaign codes ID > codes.csv")
		}
		return f.client().ExportCampaignCodes(ctx, fs.Arg(0), stdout)
	}
	return fmt.Errorf("unknown campaign subcommand %q (create, get, codes, add-codes, import)", sub)
}

// progressLine returns a function that rewrites one line on w with the
// codes made so far out of total.
func progressLine(w io.Writer, total int, start time.Time) func(made int) {
	return func(made int) {
		if total == 0 {
			return
		}
		end := ""
		if made >= total {
			end = "\n"
		}
		fmt.Fprintf(w, "\rcodes: %d/%d (%.0f%%) in %.1f s%s", made, total, 100*float64(made)/float64(total),
			time.Since(start).Seconds(), end)
	}
}

func printCampaign(w io.Writer, asJSON bool, c *client.Campaign) error {
	if asJSON {
		return writeIndented(w, c)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", c.ID)
	fmt.Fprintf(tw, "name\t%s\n", c.Name)
	fmt.Fprintf(tw, "codes\t%d (%s + %d characters)\n", c.CodeCount, c.CodePrefix, c.CodeLength)
	fmt.Fprintf(tw, "discount\t%d\n", c.DiscountAmount)
	fmt.Fprintf(tw, "min order\t%d\n", c.MinOrderAmount)
	fmt.Fprintf(tw, "uses\t%d total, %d per customer, across all codes\n", c.TotalLimit, c.PerUserLimit)
	fmt.Fprintf(tw, "window\t%s .. %s\n", c.StartsAt.UTC().Format(time.RFC3339), c.EndsAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "flash sale\t%v\n", c.FlashSale)
	fmt.Fprintf(tw, "active\t%v\n", c.Active)
	fmt.Fprintf(tw, "now\t%d reserved, %d confirmed, %d remaining\n", c.Reserved, c.Confirmed, c.Remaining)
	return tw.Flush()
}
