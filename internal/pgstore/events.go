package pgstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

// The outbox and the webhooks (migration 019, docs/events.md). The events
// themselves are written by triggers in the transactions of the changes;
// this file sequences them, pages them, and keeps the webhooks and their
// deliveries.

var (
	qEventsSequence   = mustQuery("events_sequence")
	qEventsPage       = mustQuery("events_page")
	qEventsPrune      = mustQuery("events_prune")
	qDeliveriesClaim  = mustQuery("deliveries_claim")
	qDeliveriesRecord = mustQuery("deliveries_record")
	qDeliveriesPage   = mustQuery("deliveries_page")
	qReservedWanted   = mustQuery("webhook_reserved_wanted")
)

// SetEventSettings sets what the event triggers read: the low-stock share
// of the threshold events (negative: none) and whether
// reservation.reserved is written for the feed and the topic even with no
// webhook subscribed to it.
func (s *Store) SetEventSettings(ctx context.Context, lowStockShare float64, reservedFeed bool) error {
	_, err := s.pool.Exec(ctx, `UPDATE voucherd_event_settings SET low_stock_share = $1, reserved_feed = $2
		WHERE low_stock_share IS DISTINCT FROM $1 OR reserved_feed IS DISTINCT FROM $2`, lowStockShare, reservedFeed)
	if err != nil {
		return interpretError(err)
	}
	return s.updateReservedWanted(ctx)
}

func (s *Store) updateReservedWanted(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, qReservedWanted)
	return interpretError(err)
}

// SequenceEvents gives ids to up to limit committed events and queues their
// deliveries; it returns how many it sequenced (0 also when another
// instance is sequencing right now).
func (s *Store) SequenceEvents(ctx context.Context, limit int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, interpretError(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var last int64
	err = tx.QueryRow(ctx, "SELECT last_seq FROM voucherd_event_sequencer FOR UPDATE SKIP LOCKED").Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, interpretError(err)
	}
	var top *int64
	if err := tx.QueryRow(ctx, qEventsSequence, last, limit).Scan(&top); err != nil {
		return 0, interpretError(err)
	}
	if top == nil {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, "UPDATE voucherd_event_sequencer SET last_seq = $1", *top); err != nil {
		return 0, interpretError(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, interpretError(err)
	}
	return int(*top - last), nil
}

// PruneEvents deletes up to limit events created before cutoff, oldest
// first, with their deliveries; it returns how many went.
func (s *Store) PruneEvents(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, qEventsPrune, cutoff, limit).Scan(&n)
	return n, interpretError(err)
}

// ProduceEvents hands the events after the cursor named name to produce, up
// to limit in id order, and moves the cursor past them once produce
// returned nil. The cursor's row lock is held meanwhile, so one instance
// produces at a time; a crash before the cursor moves produces the events
// again (at least once). It returns how many were produced (0 also while
// another instance holds the cursor).
func (s *Store) ProduceEvents(ctx context.Context, name string, limit int, produce func(ctx context.Context, events []voucher.Event) error) (int, error) {
	if err := s.StartCursor(ctx, name); err != nil {
		return 0, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, interpretError(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var after int64
	err = tx.QueryRow(ctx, "SELECT seq FROM voucherd_event_cursor WHERE name = $1 FOR UPDATE SKIP LOCKED", name).Scan(&after)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, interpretError(err)
	}
	list, err := s.eventsAfter(ctx, tx, eventsQuery(voucher.EventFilter{}), after, limit)
	if err != nil || len(list) == 0 {
		return 0, err
	}
	if err := produce(ctx, list); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, "UPDATE voucherd_event_cursor SET seq = $2 WHERE name = $1", name, list[len(list)-1].ID); err != nil {
		return 0, interpretError(err)
	}
	return len(list), interpretError(tx.Commit(ctx))
}

// StartCursor creates the cursor named name, if it does not exist, at the
// last event sequenced: a sink configured now receives the events
// sequenced from now on.
func (s *Store) StartCursor(ctx context.Context, name string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO voucherd_event_cursor (name, seq)
		VALUES ($1, (SELECT last_seq FROM voucherd_event_sequencer)) ON CONFLICT DO NOTHING`, name)
	return interpretError(err)
}

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// eventsQuery is events_page for a filter: one statement text per
// combination of filters, so that each is planned on its own index.
func eventsQuery(f voucher.EventFilter) string {
	q := qEventsPage
	if f.Type == "" {
		q = strings.Replace(q, "AND ($2 = '' OR type = $2)", "AND $2 = ''", 1)
	} else {
		q = strings.Replace(q, "AND ($2 = '' OR type = $2)", "AND type = $2", 1)
	}
	if f.Code == "" {
		q = strings.Replace(q, "AND ($3 = '' OR voucher_code = $3)", "AND $3 = ''", 1)
	} else {
		q = strings.Replace(q, "AND ($3 = '' OR voucher_code = $3)", "AND voucher_code = $3", 1)
	}
	return q
}

func (s *Store) eventsAfter(ctx context.Context, q queryer, sql string, after int64, limit int) ([]voucher.Event, error) {
	return s.eventsAfterFilter(ctx, q, sql, after, voucher.EventFilter{}, limit)
}

func (s *Store) eventsAfterFilter(ctx context.Context, q queryer, sql string, after int64, f voucher.EventFilter, limit int) ([]voucher.Event, error) {
	rows, err := q.Query(ctx, sql, after, string(f.Type), f.Code, limit)
	if err != nil {
		return nil, interpretError(err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Event, error) {
		var e voucher.Event
		var typ string
		err := row.Scan(&e.ID, &typ, &e.VoucherCode, &e.CreatedAt, &e.Data)
		e.Type, e.CreatedAt = voucher.EventType(typ), e.CreatedAt.UTC()
		return e, err
	})
	return list, interpretError(err)
}

// eventsListing names the feed's cursors.
const eventsListing = "events"

// Events returns a page of the feed, oldest first. Its Next is set on every
// page: events written later follow the last one.
func (s *Store) Events(ctx context.Context, f voucher.EventFilter) (voucher.EventPage, error) {
	after, err := seqCursor(f.After, eventsListing)
	if err != nil {
		return voucher.EventPage{}, err
	}
	list, err := s.eventsAfterFilter(ctx, s.pool, eventsQuery(f), after, f, f.Limit)
	if err != nil {
		return voucher.EventPage{}, err
	}
	last := after
	if len(list) > 0 {
		last = list[len(list)-1].ID
	}
	return voucher.EventPage{Events: list, Next: cursor{Listing: eventsListing, Key: strconv.FormatInt(last, 10)}.encode()}, nil
}

// seqCursor reads a cursor whose key is a seq (0 for none).
func seqCursor(s, listing string) (int64, error) {
	c, err := decodeCursor(s, listing)
	if err != nil || c == nil {
		return 0, err
	}
	n, err := strconv.ParseInt(c.Key, 10, 64)
	if err != nil || n < 0 {
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "after is not a cursor of this listing")
	}
	return n, nil
}

// ClaimDeliveries claims up to limit due deliveries for lease.
func (s *Store) ClaimDeliveries(ctx context.Context, limit int, lease time.Duration) ([]voucher.DeliveryJob, error) {
	rows, err := s.pool.Query(ctx, qDeliveriesClaim, limit, lease)
	if err != nil {
		return nil, interpretError(err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.DeliveryJob, error) {
		var j voucher.DeliveryJob
		var typ string
		err := row.Scan(&j.WebhookID, &j.URL, &j.Secret, &j.Attempt, &j.CreatedAt,
			&j.Event.ID, &typ, &j.Event.VoucherCode, &j.Event.CreatedAt, &j.Event.Data)
		j.Event.Type, j.Event.CreatedAt = voucher.EventType(typ), j.Event.CreatedAt.UTC()
		return j, err
	})
	return list, interpretError(err)
}

// RecordDelivery records the outcome of an attempt and ends its lease,
// unless the delivery was claimed again since (r.Attempt is not the last).
func (s *Store) RecordDelivery(ctx context.Context, r voucher.DeliveryResult) error {
	var status *int
	if r.HTTPStatus != 0 {
		status = &r.HTTPStatus
	}
	_, err := s.pool.Exec(ctx, qDeliveriesRecord, r.WebhookID, r.EventID, string(r.Status), r.NextAttemptAt, status, r.Error, r.Attempt)
	return interpretError(err)
}

// webhookColumns are a webhook's columns in Webhook's order.
const webhookColumns = "id, url, events, description, secret, active, created_at, updated_at"

func scanWebhook(row pgx.Row) (voucher.Webhook, error) {
	var w voucher.Webhook
	var events []string
	if err := row.Scan(&w.ID, &w.URL, &events, &w.Description, &w.Secret, &w.Active, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return w, err
	}
	for _, e := range events {
		w.Events = append(w.Events, voucher.EventType(e))
	}
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return w, nil
}

func eventStrings(list []voucher.EventType) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = string(e)
	}
	return out
}

// CreateWebhook stores w (its ID and Secret set by the caller) and returns
// it as stored.
func (s *Store) CreateWebhook(ctx context.Context, w voucher.Webhook) (voucher.Webhook, error) {
	out, err := scanWebhook(s.pool.QueryRow(ctx, `INSERT INTO voucherd_webhook (id, url, events, description, secret, active)
		VALUES ($1, $2, $3, $4, $5, true) RETURNING `+webhookColumns,
		w.ID, w.URL, eventStrings(w.Events), w.Description, w.Secret))
	if err != nil {
		return out, interpretError(err)
	}
	return out, s.updateReservedWanted(ctx)
}

// Webhook returns one webhook with its secret; CodeWebhookNotFound.
func (s *Store) Webhook(ctx context.Context, id string) (voucher.Webhook, error) {
	w, err := scanWebhook(s.pool.QueryRow(ctx, "SELECT "+webhookColumns+" FROM voucherd_webhook WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return w, voucher.Errorf(voucher.CodeWebhookNotFound, "no webhook %s", id)
	}
	return w, interpretError(err)
}

// webhooksListing names the webhook listing's cursors.
const webhooksListing = "webhooks"

// ListWebhooks returns a page of webhooks ordered by id.
func (s *Store) ListWebhooks(ctx context.Context, p voucher.PageRequest) (voucher.WebhookPage, error) {
	after, err := decodeCursor(p.After, webhooksListing)
	if err != nil {
		return voucher.WebhookPage{}, err
	}
	key := ""
	if after != nil {
		key = after.Key
	}
	rows, err := s.pool.Query(ctx, "SELECT "+webhookColumns+` FROM voucherd_webhook
		WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`, key, p.Limit+1)
	if err != nil {
		return voucher.WebhookPage{}, interpretError(err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Webhook, error) { return scanWebhook(row) })
	if err != nil {
		return voucher.WebhookPage{}, interpretError(err)
	}
	page := voucher.WebhookPage{Webhooks: list}
	if len(list) > p.Limit {
		page.Webhooks = list[:p.Limit]
		page.Next = cursor{Listing: webhooksListing, Key: page.Webhooks[p.Limit-1].ID}.encode()
	}
	return page, nil
}

// PatchWebhook changes the fields p sets.
func (s *Store) PatchWebhook(ctx context.Context, id string, p voucher.WebhookPatch) (voucher.Webhook, error) {
	var events []string
	if p.Events != nil {
		events = eventStrings(*p.Events)
	}
	w, err := scanWebhook(s.pool.QueryRow(ctx, `UPDATE voucherd_webhook SET
		url = coalesce($2, url), events = coalesce($3, events), description = coalesce($4, description),
		active = coalesce($5, active), updated_at = now()
		WHERE id = $1 RETURNING `+webhookColumns, id, p.URL, events, p.Description, p.Active))
	if errors.Is(err, pgx.ErrNoRows) {
		return w, voucher.Errorf(voucher.CodeWebhookNotFound, "no webhook %s", id)
	}
	if err != nil {
		return w, interpretError(err)
	}
	return w, s.updateReservedWanted(ctx)
}

// DeleteWebhook deletes a webhook and its deliveries.
func (s *Store) DeleteWebhook(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM voucherd_webhook WHERE id = $1", id)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return voucher.Errorf(voucher.CodeWebhookNotFound, "no webhook %s", id)
	}
	return s.updateReservedWanted(ctx)
}

// Deliveries returns a page of a webhook's deliveries, oldest event first;
// CodeWebhookNotFound for an unknown webhook.
func (s *Store) Deliveries(ctx context.Context, f voucher.DeliveryFilter) (voucher.DeliveryPage, error) {
	name := "d:" + f.WebhookID
	after, err := seqCursor(f.After, name)
	if err != nil {
		return voucher.DeliveryPage{}, err
	}
	if _, err := s.Webhook(ctx, f.WebhookID); err != nil {
		return voucher.DeliveryPage{}, err
	}
	rows, err := s.pool.Query(ctx, qDeliveriesPage, f.WebhookID, after, string(f.Status), f.Limit+1)
	if err != nil {
		return voucher.DeliveryPage{}, interpretError(err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Delivery, error) {
		var d voucher.Delivery
		var typ, status string
		err := row.Scan(&d.WebhookID, &d.EventID, &typ, &d.VoucherCode, &status, &d.Attempts, &d.CreatedAt,
			&d.NextAttemptAt, &d.LastAttemptAt, &d.LastStatus, &d.LastError, &d.DeliveredAt)
		d.EventType, d.Status = voucher.EventType(typ), voucher.DeliveryStatus(status)
		return d, err
	})
	if err != nil {
		return voucher.DeliveryPage{}, interpretError(err)
	}
	page := voucher.DeliveryPage{Deliveries: list}
	if len(list) > f.Limit {
		page.Deliveries = list[:f.Limit]
		page.Next = cursor{Listing: name, Key: strconv.FormatInt(page.Deliveries[f.Limit-1].EventID, 10)}.encode()
	}
	return page, nil
}
