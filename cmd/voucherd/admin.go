package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/voucherd/voucherd/client"
)

// adminFlags are the flags of the commands that talk to a running voucherd.
type adminFlags struct {
	url   string
	token string
	json  bool
}

func registerAdminFlags(fs *flag.FlagSet, f *adminFlags) {
	addr := envOr("VOUCHERD_ADDR", "127.0.0.1:8080")
	fs.StringVar(&f.url, "url", envOr("VOUCHERD_URL", "http://"+addr), "voucherd base URL (VOUCHERD_URL)")
	// The token's default is not shown in the help, which would print it.
	fs.StringVar(&f.token, "token", "", "admin token (default: VOUCHERD_ADMIN_TOKEN)")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of a table")
}

func (f adminFlags) client() *client.Client {
	token := f.token
	if token == "" {
		token = os.Getenv("VOUCHERD_ADMIN_TOKEN")
	}
	return client.New(f.url, token, client.WithMaxAttempts(2))
}

func runVoucher(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "Usage: voucherd voucher create|get|patch|"+strings.ReplaceAll(voucherAdminNames, ", ", "|")+" [flags]   (voucherd voucher create --help)")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return flag.ErrHelp
		}
		return errors.New("voucher needs a subcommand: create, get, patch, " + voucherAdminNames)
	}
	sub, args := args[0], args[1:]
	var f adminFlags
	fs := newFlagSet("voucher", sub+" ...", stderr)
	registerAdminFlags(fs, &f)
	switch sub {
	case "create":
		var v client.Voucher
		var starts, ends string
		fs.StringVar(&v.Code, "code", "", "voucher code (required)")
		fs.Int64Var(&v.DiscountAmount, "discount", 0, "fixed discount amount in minor units (this or --percent is required)")
		fs.Float64Var(&v.DiscountPercent, "percent", 0, "discount as a percentage of the order amount, 1 to 100 with at most two decimals (instead of --discount)")
		fs.Int64Var(&v.MaxDiscountAmount, "max-discount", 0, "cap of a --percent discount in minor units (default no cap)")
		fs.Int64Var(&v.MinOrderAmount, "min-order", 0, "minimum order amount in minor units")
		total := fs.Int("total", 0, "total uses (required)")
		perUser := fs.Int("per-user", 1, "uses one customer may hold")
		fs.StringVar(&starts, "starts", "", "start, RFC 3339 (default now)")
		fs.StringVar(&ends, "ends", "", "end, RFC 3339 (default the start + 30 days); it must not be past")
		fs.BoolVar(&v.FlashSale, "flash", false, "route reservations through the Redis gate")
		fs.StringVar(&v.CustomerIDNormalization, "customer-id-normalization", "none",
			"none, or email: count the spellings of one e-mail address (case, +tag, gmail dots) as one customer")
		fs.StringVar(&v.Currency, "currency", "", "ISO 4217 currency (EUR) every reservation must name (default any)")
		fs.StringVar(&v.CustomerID, "customer", "", "the one customerId the voucher serves (default every customer)")
		fs.Int64Var(&v.BudgetAmount, "budget", 0, "money budget in minor units: the most discount its held uses may give out together (default none)")
		clip := fs.Bool("clip", false, "with --budget: give the last orders what is left of the budget instead of refusing them")
		var sched scheduleFlags
		sched.register(fs)
		windowLimit := fs.Int("window-limit", 0, "uses per occurrence of the --window windows (default no quota)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if *clip {
			v.BudgetShortfall = "clip"
		}
		v.Schedule = sched.schedule()
		if *windowLimit > 0 {
			var err error
			if v.WindowLimit, err = int32Setting("window-limit", *windowLimit); err != nil {
				return err
			}
		}
		var err error
		if v.TotalLimit, err = int32Setting("total", *total); err != nil {
			return err
		}
		if v.PerUserLimit, err = int32Setting("per-user", *perUser); err != nil {
			return err
		}
		if v.StartsAt, err = parseTimeOr(starts, time.Now()); err != nil {
			return err
		}
		if v.EndsAt, err = parseTimeOr(ends, v.StartsAt.Add(30*24*time.Hour)); err != nil {
			return err
		}
		created, err := f.client().CreateVoucher(ctx, v)
		if err != nil {
			return err
		}
		return printVoucher(stdout, f.json, created)
	case "get":
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: voucherd voucher get CODE")
		}
		v, err := f.client().GetVoucher(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		return printVoucher(stdout, f.json, v)
	case "patch":
		var p client.VoucherPatch
		total := fs.Int("total", 0, "new total uses (0 keeps it)")
		perUser := fs.Int("per-user", 0, "new per-customer limit (0 keeps it)")
		discount := fs.Int64("discount", 0, "new fixed discount amount (0 keeps it); drops a percentage")
		percent := fs.Float64("percent", 0, "new discount percentage, 1 to 100 with at most two decimals (0 keeps it)")
		maxDiscount := fs.Int64("max-discount", 0, "new cap of a percentage discount, given with --percent (0 keeps it)")
		ends := fs.String("ends", "", "new end, RFC 3339; it must not be past")
		budget := fs.Int64("budget", 0, "new money budget in minor units, of a voucher that has one (0 keeps it); not below what is held")
		var sched scheduleFlags
		sched.register(fs)
		windowLimit := fs.Int("window-limit", 0, "new uses per occurrence, of a voucher that has a quota (0 keeps it); not below what the current one holds")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: voucherd voucher patch [flags] CODE")
		}
		p.Schedule = sched.schedule()
		if *windowLimit > 0 {
			w, err := int32Setting("window-limit", *windowLimit)
			if err != nil {
				return err
			}
			p.WindowLimit = &w
		}
		if *budget > 0 {
			p.BudgetAmount = budget
		}
		if *total > 0 {
			t, err := int32Setting("total", *total)
			if err != nil {
				return err
			}
			p.TotalLimit = &t
		}
		if *perUser > 0 {
			u, err := int32Setting("per-user", *perUser)
			if err != nil {
				return err
			}
			p.PerUserLimit = &u
		}
		if *discount > 0 {
			p.DiscountAmount = discount
		}
		if *percent > 0 {
			p.DiscountPercent = percent
		}
		if *maxDiscount > 0 {
			p.MaxDiscountAmount = maxDiscount
		}
		if *ends != "" {
			e, err := time.Parse(time.RFC3339, *ends)
			if err != nil {
				return fmt.Errorf("--ends: %w", err)
			}
			p.EndsAt = &e
		}
		v, err := f.client().PatchVoucher(ctx, fs.Arg(0), p)
		if err != nil {
			return err
		}
		return printVoucher(stdout, f.json, v)
	}
	if run, ok := voucherAdminCommands[sub]; ok {
		return run(ctx, fs, &f, args, stdout)
	}
	return fmt.Errorf("unknown voucher subcommand %q (create, get, patch, %s)", sub, voucherAdminNames)
}

func parseTimeOr(s string, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time: %w", s, err)
	}
	return t, nil
}

func printVoucher(w io.Writer, asJSON bool, v *client.Voucher) error {
	if asJSON {
		return writeIndented(w, v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "code\t%s\n", v.Code)
	switch {
	case v.DiscountPercent != 0 && v.MaxDiscountAmount != 0:
		fmt.Fprintf(tw, "discount\t%s%% of the order amount, at most %d\n", strconv.FormatFloat(v.DiscountPercent, 'f', -1, 64), v.MaxDiscountAmount)
	case v.DiscountPercent != 0:
		fmt.Fprintf(tw, "discount\t%s%% of the order amount\n", strconv.FormatFloat(v.DiscountPercent, 'f', -1, 64))
	default:
		fmt.Fprintf(tw, "discount\t%d\n", v.DiscountAmount)
	}
	fmt.Fprintf(tw, "min order\t%d\n", v.MinOrderAmount)
	fmt.Fprintf(tw, "uses\t%d total, %d per customer\n", v.TotalLimit, v.PerUserLimit)
	fmt.Fprintf(tw, "window\t%s .. %s\n", v.StartsAt.UTC().Format(time.RFC3339), v.EndsAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "flash sale\t%v\n", v.FlashSale)
	customers := "ids as given"
	if v.CustomerIDNormalization == "email" {
		customers = "ids as e-mail addresses (normalised)"
	}
	fmt.Fprintf(tw, "customers\t%s\n", customers)
	if v.CustomerID != "" {
		fmt.Fprintf(tw, "customer\tonly %s\n", v.CustomerID)
	}
	if v.Currency != "" {
		fmt.Fprintf(tw, "currency\t%s\n", v.Currency)
	}
	fmt.Fprintf(tw, "active\t%v\n", v.Active)
	fmt.Fprintf(tw, "now\t%d reserved, %d confirmed, %d remaining\n", v.Reserved, v.Confirmed, v.Remaining)
	if v.BudgetAmount > 0 {
		shortfall := "refused"
		if v.BudgetShortfall == "clip" {
			shortfall = "clipped to what is left"
		}
		fmt.Fprintf(tw, "budget\t%d (a discount that does not fit is %s)\n", v.BudgetAmount, shortfall)
		fmt.Fprintf(tw, "budget now\t%d reserved, %d confirmed, %d remaining\n", v.BudgetReserved, v.BudgetConfirmed, v.BudgetRemaining)
	}
	if v.Schedule != nil {
		windows := make([]string, 0, len(v.Schedule.Windows))
		for _, w := range v.Schedule.Windows {
			windows = append(windows, strings.Join(w.Days, ",")+"/"+w.From+"-"+w.To)
		}
		fmt.Fprintf(tw, "windows\t%s in %s\n", strings.Join(windows, " "), v.Schedule.TimeZone)
		if v.WindowLimit > 0 {
			fmt.Fprintf(tw, "per window\t%d uses\n", v.WindowLimit)
		}
	}
	switch cw := v.CurrentWindow; {
	case cw != nil && v.WindowLimit > 0:
		fmt.Fprintf(tw, "this window\t%s .. %s: %d used, %d remaining\n", cw.StartsAt.UTC().Format(time.RFC3339),
			cw.EndsAt.UTC().Format(time.RFC3339), cw.Used, cw.Remaining)
	case cw != nil:
		fmt.Fprintf(tw, "this window\t%s .. %s\n", cw.StartsAt.UTC().Format(time.RFC3339), cw.EndsAt.UTC().Format(time.RFC3339))
	case !v.NextWindowAt.IsZero():
		fmt.Fprintf(tw, "next window\t%s\n", v.NextWindowAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runWarmup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f adminFlags
	fs := newFlagSet("warmup", "CODE", stderr)
	registerAdminFlags(fs, &f)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("warmup needs exactly one voucher code")
	}
	res, err := f.client().Warmup(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if f.json {
		return writeIndented(stdout, map[string]any{"code": fs.Arg(0), "inRedis": res.InRedis, "loadedByThisCall": res.LoadedByThisCall})
	}
	switch {
	case res.LoadedByThisCall:
		fmt.Fprintf(stdout, "%s is in Redis: loaded by this call\n", fs.Arg(0))
	case res.InRedis:
		fmt.Fprintf(stdout, "%s is in Redis: it was there already; nothing changed\n", fs.Arg(0))
	default:
		return fmt.Errorf("%s is not in Redis yet: another instance is still loading it; run warmup again", fs.Arg(0))
	}
	return nil
}

// scheduleFlags are the flags of a voucher's recurring windows: a time zone
// and windows written DAYS/FROM-TO (MON,WED,FRI/13:00-14:00), repeatable.
type scheduleFlags struct {
	zone    string
	windows []client.Window
}

func (s *scheduleFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.zone, "time-zone", "UTC", "IANA time zone of the --window times")
	fs.Func("window", "a recurring window DAYS/FROM-TO, e.g. MON,WED,FRI/13:00-14:00 (repeat for more); the voucher is eligible only inside one",
		func(v string) error {
			days, span, ok := strings.Cut(v, "/")
			from, to, ok2 := strings.Cut(span, "-")
			if !ok || !ok2 || days == "" {
				return fmt.Errorf("%q is not DAYS/FROM-TO (MON,WED,FRI/13:00-14:00)", v)
			}
			s.windows = append(s.windows, client.Window{Days: strings.Split(strings.ToUpper(days), ","), From: from, To: to})
			return nil
		})
}

// schedule is the schedule the flags give, nil without --window.
func (s *scheduleFlags) schedule() *client.Schedule {
	if len(s.windows) == 0 {
		return nil
	}
	return &client.Schedule{TimeZone: s.zone, Windows: s.windows}
}
