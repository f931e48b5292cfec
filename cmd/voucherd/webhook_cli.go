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

const webhookSubcommands = "create, list, get, update, delete, deliveries"

// runWebhook administers webhooks through the HTTP API.
func runWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "Usage: voucherd webhook "+strings.ReplaceAll(webhookSubcommands, ", ", "|")+" [flags]   (voucherd webhook create --help)")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return flag.ErrHelp
		}
		return errors.New("webhook needs a subcommand: " + webhookSubcommands)
	}
	sub, args := args[0], args[1:]
	var f adminFlags
	fs := newFlagSet("webhook", sub+" ...", stderr)
	registerAdminFlags(fs, &f)
	switch sub {
	case "create", "update":
		url := fs.String("endpoint", "", "the receiver's URL (https)")
		events := fs.String("events", "", "comma-separated event types, e.g. reservation.confirmed,voucher.sold_out")
		desc := fs.String("description", "", "a note for people")
		active := fs.String("active", "", "update: true or false")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if sub == "create" {
			if *url == "" || *events == "" || fs.NArg() != 0 {
				return errors.New("usage: voucherd webhook create --endpoint URL --events TYPE,TYPE [--description TEXT]")
			}
			w, err := f.client().CreateWebhook(ctx, client.NewWebhook{URL: *url, Events: splitList(*events), Description: *desc})
			if err != nil {
				return err
			}
			return printWebhook(stdout, f.json, w)
		}
		if fs.NArg() != 1 {
			return errors.New("usage: voucherd webhook update [--endpoint URL] [--events ...] [--description TEXT] [--active BOOL] ID")
		}
		var p client.WebhookPatch
		fs.Visit(func(fl *flag.Flag) {
			switch fl.Name {
			case "endpoint":
				p.URL = url
			case "events":
				list := splitList(*events)
				p.Events = &list
			case "description":
				p.Description = desc
			case "active":
				b := *active == "true"
				p.Active = &b
			}
		})
		if p.Active != nil && *active != "true" && *active != "false" {
			return errors.New("--active must be true or false")
		}
		w, err := f.client().PatchWebhook(ctx, fs.Arg(0), p)
		if err != nil {
			return err
		}
		return printWebhook(stdout, f.json, w)
	case "get", "delete":
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: voucherd webhook %s ID", sub)
		}
		if sub == "delete" {
			return f.client().DeleteWebhook(ctx, fs.Arg(0))
		}
		w, err := f.client().GetWebhook(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		return printWebhook(stdout, f.json, w)
	case "list":
		var p pageFlags
		registerPageFlags(fs, &p)
		if err := fs.Parse(args); err != nil {
			return err
		}
		return walk(p, stdout, func(after string) (string, error) {
			page, err := f.client().ListWebhooks(ctx, client.Page{Limit: p.limit, After: after})
			if err != nil {
				return "", err
			}
			if f.json {
				return page.Next, writeIndented(stdout, page)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tACTIVE\tEVENTS\tURL")
			for _, w := range page.Webhooks {
				fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", w.ID, w.Active, strings.Join(w.Events, ","), w.URL)
			}
			return page.Next, tw.Flush()
		})
	case "deliveries":
		var p pageFlags
		registerPageFlags(fs, &p)
		status := fs.String("status", "", "pending, delivered or failed")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: voucherd webhook deliveries [--status S] ID")
		}
		return walk(p, stdout, func(after string) (string, error) {
			page, err := f.client().WebhookDeliveries(ctx, fs.Arg(0), *status, client.Page{Limit: p.limit, After: after})
			if err != nil {
				return "", err
			}
			if f.json {
				return page.Next, writeIndented(stdout, page)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EVENT\tTYPE\tVOUCHER\tSTATUS\tATTEMPTS\tLAST\tNEXT")
			for _, d := range page.Deliveries {
				next := ""
				if d.NextAttemptAt != nil {
					next = d.NextAttemptAt.UTC().Format(time.RFC3339)
				}
				last := d.LastError
				if d.LastStatus != 0 {
					last = fmt.Sprint(d.LastStatus)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.EventID, d.EventType, d.VoucherCode, d.Status, d.Attempts, last, next)
			}
			return page.Next, tw.Flush()
		})
	}
	return fmt.Errorf("unknown webhook subcommand %q (%s)", sub, webhookSubcommands)
}

func printWebhook(w io.Writer, asJSON bool, h *client.Webhook) error {
	if asJSON {
		return writeIndented(w, h)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", h.ID)
	fmt.Fprintf(tw, "url\t%s\n", h.URL)
	fmt.Fprintf(tw, "events\t%s\n", strings.Join(h.Events, ","))
	fmt.Fprintf(tw, "active\t%v\n", h.Active)
	if h.Description != "" {
		fmt.Fprintf(tw, "description\t%s\n", h.Description)
	}
	if h.Secret != "" {
		fmt.Fprintf(tw, "secret\t%s\t(shown once: keep it)\n", h.Secret)
	}
	return tw.Flush()
}

// runEvents prints the event feed, one JSON event a line.
func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f adminFlags
	fs := newFlagSet("events", "", stderr)
	registerAdminFlags(fs, &f)
	var p pageFlags
	registerPageFlags(fs, &p)
	var q client.EventQuery
	fs.StringVar(&q.Type, "type", "", "only events of this type")
	fs.StringVar(&q.Code, "code", "", "only events of this voucher")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return walk(p, stdout, func(after string) (string, error) {
		q.Page = client.Page{Limit: p.limit, After: after}
		page, err := f.client().Events(ctx, q)
		if err != nil {
			return "", err
		}
		for _, e := range page.Events {
			fmt.Fprintf(stdout, "%d\t%s\t%s\t%s\n", e.ID, e.CreatedAt.UTC().Format(time.RFC3339Nano), e.Type, e.Data)
		}
		if len(page.Events) == 0 {
			return "", nil // the feed's end: its cursor stays valid for later
		}
		return page.Next, nil
	})
}
