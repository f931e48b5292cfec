package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// feed sequences every committed event and returns the whole feed.
func feed(t testing.TB, s *pgstore.Store) []voucher.Event {
	t.Helper()
	ctx := context.Background()
	for {
		n, err := s.SequenceEvents(ctx, 1000)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	var out []voucher.Event
	after := ""
	for {
		page, err := s.Events(ctx, voucher.EventFilter{Limit: 1000, After: after})
		require.NoError(t, err)
		out = append(out, page.Events...)
		if len(page.Events) == 0 {
			return out
		}
		after = page.Next
	}
}

func eventTypes(list []voucher.Event) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = string(e.Type)
		var d struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(e.Data, &d)
		if d.Reason != "" {
			out[i] += ":" + d.Reason
		}
	}
	return out
}

func TestEventsOfChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "EVT", 3, 1)

	_, err := s.Reserve(ctx, request("EVT", 1, "e-1"), now, ttl)
	require.NoError(t, err)
	res, err := s.Reserve(ctx, request("EVT", 1, "e-1"), now, ttl)
	require.NoError(t, err)
	require.True(t, res.Replay)
	_, err = s.Reserve(ctx, request("EVT", 1, "e-other"), now, ttl)
	requireCode(t, err, voucher.CodeAlreadyUsed)
	_, err = s.Confirm(ctx, "EVT", "e-1", now)
	require.NoError(t, err)
	_, err = s.Confirm(ctx, "EVT", "e-1", now)
	require.NoError(t, err)
	require.Equal(t, []string{"reservation.confirmed"}, eventTypes(feed(t, s)), "reserved is opt-in; a replay and a refusal write nothing")

	require.NoError(t, s.SetEventSettings(ctx, 0.5, true))
	_, err = s.Reserve(ctx, request("EVT", 2, "e-2"), now, ttl)
	require.NoError(t, err)
	_, err = s.Reserve(ctx, request("EVT", 3, "e-3"), now, ttl)
	require.NoError(t, err)
	_, _, err = s.Release(ctx, "EVT", "e-2", now)
	require.NoError(t, err)
	_, _, err = s.Release(ctx, "EVT", "e-1", now)
	require.NoError(t, err)
	_, err = s.ExpireDue(ctx, now.Add(ttl), 10)
	require.NoError(t, err)
	f := false
	_, _, err = s.PatchVoucher(ctx, "EVT", voucher.Patch{Active: &f})
	require.NoError(t, err)
	list := feed(t, s)
	require.Equal(t, []string{
		"reservation.confirmed",
		"reservation.reserved", "voucher.low_stock", // 3 → 1 free of 3: below ceil(1.5) = 2
		"reservation.reserved", "voucher.sold_out",
		"reservation.released:released", "reservation.released:refunded", "reservation.released:expired",
		"voucher.disabled",
	}, eventTypes(list))
	for i := 1; i < len(list); i++ {
		require.Greater(t, list[i].ID, list[i-1].ID)
	}
	var d map[string]any
	require.NoError(t, json.Unmarshal(list[0].Data, &d))
	require.Equal(t, "e-1", d["orderId"])
	require.Equal(t, "CONFIRMED", d["status"])
}

// TestEventsFlashSaleSoldOutOnce: concurrent reservations of a small sale,
// combined or not, write one sold_out and one reserved event per use.
func TestEventsFlashSaleSoldOutOnce(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		require.NoError(t, s.SetEventSettings(ctx, 0.1, true))
		newVoucher(t, s, "SALE", 50, 1)
		concurrently(120, func(i int) error {
			_, err := s.Reserve(ctx, request("SALE", int64(i+1), fmt.Sprintf("s-%d", i)), now, ttl)
			return err
		})
		counts := map[voucher.EventType]int{}
		for _, e := range feed(t, s) {
			counts[e.Type]++
		}
		require.Equal(t, map[voucher.EventType]int{voucher.EventReserved: 50, voucher.EventSoldOut: 1, voucher.EventLowStock: 1}, counts)
	})
}

func TestWebhookDeliveriesQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "HOOK", 10, 1)
	w, err := s.CreateWebhook(ctx, voucher.Webhook{ID: "wh_1", URL: "https://example.com/h", Secret: "s",
		Events: []voucher.EventType{voucher.EventConfirmed}})
	require.NoError(t, err)
	for i := range 3 {
		o := fmt.Sprintf("h-%d", i)
		_, err := s.Reserve(ctx, request("HOOK", int64(i+1), o), now, ttl)
		require.NoError(t, err)
		_, err = s.Confirm(ctx, "HOOK", o, now)
		require.NoError(t, err)
	}
	feed(t, s)
	jobs, err := s.ClaimDeliveries(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "one voucher: its earliest delivery only")
	again, err := s.ClaimDeliveries(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, again, "leased")
	require.NoError(t, s.RecordDelivery(ctx, voucher.DeliveryResult{WebhookID: w.ID, EventID: jobs[0].Event.ID,
		Attempt: jobs[0].Attempt + 1, Status: voucher.DeliveryPending, NextAttemptAt: time.Now(), HTTPStatus: 500}))
	stale, err := s.ClaimDeliveries(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, stale, "an outcome of another attempt changes nothing: still leased")
	require.NoError(t, s.RecordDelivery(ctx, voucher.DeliveryResult{WebhookID: w.ID, EventID: jobs[0].Event.ID,
		Attempt: jobs[0].Attempt, Status: voucher.DeliveryDelivered, NextAttemptAt: time.Now(), HTTPStatus: 200}))
	next, err := s.ClaimDeliveries(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, next, 1)
	require.Greater(t, next[0].Event.ID, jobs[0].Event.ID)
	page, err := s.Deliveries(ctx, voucher.DeliveryFilter{WebhookID: w.ID, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Deliveries, 2)
	require.Equal(t, voucher.DeliveryDelivered, page.Deliveries[0].Status)
	require.NotEmpty(t, page.Next)

	// A retry moves the later deliveries of the voucher behind it.
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	require.NoError(t, s.RecordDelivery(ctx, voucher.DeliveryResult{WebhookID: w.ID, EventID: next[0].Event.ID,
		Attempt: next[0].Attempt, Status: voucher.DeliveryPending, NextAttemptAt: later, HTTPStatus: 500}))
	page, err = s.Deliveries(ctx, voucher.DeliveryFilter{WebhookID: w.ID, Status: voucher.DeliveryPending, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Deliveries, 2)
	for _, d := range page.Deliveries {
		require.True(t, d.NextAttemptAt.Equal(later), "%v", d.NextAttemptAt)
	}
	require.Equal(t, 500, page.Deliveries[0].LastStatus)
	none, err := s.ClaimDeliveries(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, none)
}

// TestEventsReplacementAndPrune: a replacement reports the replaced hold
// released with reason replaced, then the new one reserved; pruning
// deletes old events with their deliveries.
func TestEventsReplacementAndPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	require.NoError(t, s.SetEventSettings(ctx, -1, true))
	newVoucher(t, s, "REPL", 5, 1)
	_, err := s.Reserve(ctx, request("REPL", 1, "p-1"), now, ttl)
	require.NoError(t, err)
	r := request("REPL", 1, "p-2")
	r.ReplacesOrderID = "p-1"
	_, err = s.Reserve(ctx, r, now.Add(time.Minute), ttl)
	require.NoError(t, err)
	list := feed(t, s)
	require.Equal(t, []string{"reservation.reserved", "reservation.released:replaced", "reservation.reserved"}, eventTypes(list))
	var d map[string]any
	require.NoError(t, json.Unmarshal(list[1].Data, &d))
	require.Equal(t, "p-2", d["replacedBy"])

	_, err = s.CreateWebhook(ctx, voucher.Webhook{ID: "wh_p", URL: "https://example.com/", Secret: "s",
		Events: []voucher.EventType{voucher.EventReleased}})
	require.NoError(t, err)
	_, _, err = s.Release(ctx, "REPL", "p-2", now)
	require.NoError(t, err)
	require.Len(t, feed(t, s), 4)
	n, err := s.PruneEvents(ctx, time.Now().Add(time.Hour), 3)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = s.PruneEvents(ctx, time.Now().Add(time.Hour), 3)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	page, err := s.Deliveries(ctx, voucher.DeliveryFilter{WebhookID: "wh_p", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page.Deliveries)
	require.Empty(t, feed(t, s))
}

// TestEventsReservedOfAppliedBatches: the Kafka consumer's apply, which reads
// the reserved event's setting once per call, writes one reserved event per
// redemption it inserts while the setting is on, and none while it is off.
func TestEventsReservedOfAppliedBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "APPLY", 10, 2)

	_, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{event("APPLY", 1, "a-1"), event("APPLY", 2, "a-2")})
	require.NoError(t, err)
	require.NoError(t, s.SetEventSettings(ctx, 0.1, true))
	_, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{
		event("APPLY", 3, "a-3"), event("APPLY", 1, "a-1"), event("APPLY", 4, "a-4"),
	})
	require.NoError(t, err)
	var reserved []string
	for _, e := range feed(t, s) {
		if e.Type == voucher.EventReserved {
			var d struct {
				OrderID string `json:"orderId"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &d))
			reserved = append(reserved, d.OrderID)
		}
	}
	require.ElementsMatch(t, []string{"a-3", "a-4"}, reserved, "one per insert while on; none before, none for a redelivery")
}
