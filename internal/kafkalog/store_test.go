package kafkalog

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// The whole Kafka path against the real store: events published by the
// producer are written by the consumer through pgstore.ApplyReserved, the
// events PostgreSQL refuses go to the dead-letter topic, and a redelivery of
// the whole topic to a fresh group changes nothing in the database.
func TestConsumerWithPostgresStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	store, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	require.NoError(t, store.Migrate(ctx))

	now := time.Now().UTC().Truncate(time.Microsecond)
	const code, limit = "PGKAFKA", 40
	_, err = store.CreateVoucher(ctx, voucher.Voucher{
		Code: code, DiscountAmount: 100_000, TotalLimit: limit, PerUserLimit: 1,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(24 * time.Hour),
	})
	require.NoError(t, err)

	// Two more events than uses (the CHECK constraint refuses them) and one
	// for a voucher that does not exist.
	var evs []voucher.ReservedEvent
	for i := range limit + 2 {
		evs = append(evs, voucher.EventFromHold(code, voucher.Hold{
			OrderID: fmt.Sprintf("pg-order-%d", i), CustomerID: strconv.Itoa(i + 1),
			OrderAmount: 250_000, DiscountAmount: 100_000,
			ReservedAt: now, ExpiresAt: now.Add(15 * time.Minute),
		}))
	}
	ghost := evs[0]
	ghost.Code, ghost.OrderID = "GHOST", "pg-ghost"
	evs = append(evs, ghost)

	cfg := testConfig(t, testenv.Kafka(t).Brokers, 3)
	l := newLog(t, cfg)
	publishAll(t, l, evs)
	require.Error(t, l.CaughtUp(ctx))

	c := newConsumer(t, cfg, store)
	c.Start(ctx)
	require.Eventually(t, func() bool { return l.CaughtUp(ctx) == nil }, 60*time.Second, 50*time.Millisecond)
	c.Stop()
	st := c.Stats()
	require.EqualValues(t, limit, st.Applied)
	require.EqualValues(t, 3, st.Rejected)

	v, err := store.Voucher(ctx, code)
	require.NoError(t, err)
	require.EqualValues(t, limit, v.UsedCount)
	require.EqualValues(t, limit, v.Reserved)
	dead := consume(t, cfg.Brokers, cfg.DeadLetterTopic, 3)
	for _, r := range dead {
		require.NotEmpty(t, headers(r)[HeaderDeadLetterReason])
	}
	r, err := store.Redemption(ctx, code, "pg-order-0")
	if err == nil {
		require.Equal(t, voucher.StatusReserved, r.Status)
		require.True(t, r.ExpiresAt.Equal(evs[0].ExpiresAt))
	}

	// A fresh group replays the whole topic: the store changes nothing.
	cfg.Group = uniqueGroup()
	replay := sum(drain(t, newConsumer(t, cfg, store), len(evs)))
	require.Equal(t, limit, replay.AlreadyApplied)
	require.Equal(t, 3, replay.Rejected)
	require.Zero(t, replay.Applied)
	again, err := store.Voucher(ctx, code)
	require.NoError(t, err)
	require.Equal(t, v.UsedCount, again.UsedCount)
	require.Equal(t, v.Reserved, again.Reserved)
}

// An event written to the topic by hand, with twice the discount its
// voucher gives, is dead-lettered by the consumer's check with the reason,
// and PostgreSQL gets nothing of it; valid events beside it are applied,
// among them one computed with the definition a patch replaced just after
// it was reserved (read back from the audit trail).
func TestConsumerRefusesEventThatDisagreesWithItsVoucher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	store, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	require.NoError(t, store.Migrate(ctx))

	start := time.Now().UTC()
	const code = "CHECKED"
	_, err = store.CreateVoucher(ctx, voucher.Voucher{
		Code: code, DiscountPercentBP: 500, TotalLimit: 10, PerUserLimit: 1, FlashSale: true,
		StartsAt: start.Add(-time.Hour), EndsAt: start.Add(24 * time.Hour),
	})
	require.NoError(t, err)
	before := time.Now().UTC().Truncate(time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	ten := int32(1000)
	_, _, err = store.PatchVoucher(ctx, code, voucher.Patch{DiscountPercentBP: &ten})
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Millisecond)

	check, err := voucher.NewEventChecker(voucher.EventCheckConfig{Store: store, History: store, Staleness: time.Minute})
	require.NoError(t, err)
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 1)
	cfg.Check = check

	event := func(orderID string, discount int64, at time.Time) string {
		return fmt.Sprintf(`{"version":1,"type":"VoucherReserved","code":%q,"customerId":%q,"orderId":%q,`+
			`"orderAmount":50000,"discountAmount":%d,"reservedAt":%q,"expiresAt":%q}`,
			code, "c-"+orderID, orderID, discount, at.Format(time.RFC3339Nano), at.Add(15*time.Minute).Format(time.RFC3339Nano))
	}
	doubled := event("doubled-1", 10_000, now)
	cl := newClient(t, cfg.Brokers)
	for _, v := range []string{doubled, event("valid-1", 5000, now), event("before-patch-1", 2500, before)} {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: cfg.Topic, Key: []byte(code), Value: []byte(v)}).FirstErr())
	}

	c := newConsumer(t, cfg, store)
	res := sum(drain(t, c, 3))
	require.Equal(t, 2, res.Applied)
	require.Equal(t, map[string]int{voucher.MismatchDiscount: 1}, res.Mismatched)
	require.Equal(t, map[string]uint64{voucher.MismatchDiscount: 1}, c.Stats().Mismatched)

	dead := consume(t, cfg.Brokers, cfg.DeadLetterTopic, 1)
	require.Equal(t, doubled, string(dead[0].Value))
	require.Contains(t, headers(dead[0])[HeaderDeadLetterReason], "discount_mismatch: discountAmount 10000, the voucher gives 5000")

	_, err = store.Redemption(ctx, code, "doubled-1")
	require.True(t, voucher.IsCode(err, voucher.CodeReservationNotFound), "no row for the refused event: %v", err)
	for order, discount := range map[string]int64{"valid-1": 5000, "before-patch-1": 2500} {
		r, err := store.Redemption(ctx, code, order)
		require.NoError(t, err)
		require.EqualValues(t, discount, r.DiscountAmount)
	}
	v, err := store.Voucher(ctx, code)
	require.NoError(t, err)
	require.EqualValues(t, 2, v.UsedCount)
}

// Stack events through Kafka against the real store: a stack is written
// whole, one the database refuses (a member sold out) or the check refuses
// (a member's discount) is dead-lettered whole with nothing written, and a
// redelivery of the topic to a fresh group changes nothing.
func TestConsumerAppliesStackEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	store, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	require.NoError(t, store.Migrate(ctx))

	now := time.Now().UTC().Truncate(time.Millisecond)
	limits := map[string]int32{"STACKA": 10, "STACKB": 1, "STACKC": 10}
	for code, limit := range limits {
		_, err = store.CreateVoucher(ctx, voucher.Voucher{
			Code: code, DiscountAmount: 1000, TotalLimit: limit, PerUserLimit: 5, FlashSale: true,
			StartsAt: now.Add(-time.Hour), EndsAt: now.Add(24 * time.Hour), Stacking: voucher.Stacking{Stackable: true},
		})
		require.NoError(t, err)
	}
	check, err := voucher.NewEventChecker(voucher.EventCheckConfig{Store: store, Staleness: time.Minute})
	require.NoError(t, err)
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 2)
	cfg.Check = check
	stack := func(orderID string, discounts map[string]int64, codes ...string) voucher.ReservedEvent {
		e := voucher.ReservedEvent{StackCustomerID: "42"}
		left := int64(20_000)
		for i, code := range codes {
			h := voucher.Hold{OrderID: voucher.StackMemberOrderID(orderID, i+1), CustomerID: "42", OrderAmount: left,
				DiscountAmount: 1000, ReservedAt: now, ExpiresAt: now.Add(15 * time.Minute)}
			if d, ok := discounts[code]; ok {
				h.DiscountAmount = d
			}
			if i == 0 {
				first := voucher.EventFromHold(code, h)
				first.Members, first.StackCustomerID = e.Members, e.StackCustomerID
				e = first
			}
			e.Members = append(e.Members, voucher.StackEventMember{Code: code, CustomerID: "42", OrderID: h.OrderID,
				OrderAmount: left, DiscountAmount: h.DiscountAmount})
			left -= h.DiscountAmount
		}
		return e
	}
	evs := []voucher.ReservedEvent{
		stack("kstack-1", nil, "STACKA", "STACKB"),
		stack("kstack-2", nil, "STACKA", "STACKB"),                              // STACKB sold out
		stack("kstack-3", map[string]int64{"STACKC": 2000}, "STACKA", "STACKC"), // doubled discount
	}
	// Every event is keyed by STACKA, its first code: one partition, in
	// order.
	l := newLog(t, cfg)
	for _, e := range evs {
		require.NoError(t, l.PublishReserved(ctx, e))
	}
	c := newConsumer(t, cfg, store)
	res := sum(drain(t, c, len(evs)))
	require.Equal(t, 1, res.Applied)
	require.Equal(t, 1, res.Rejected)
	require.Equal(t, map[string]int{voucher.MismatchDiscount: 1}, res.Mismatched)
	dead := consume(t, cfg.Brokers, cfg.DeadLetterTopic, 2)
	for _, r := range dead {
		require.NotEmpty(t, headers(r)[HeaderDeadLetterReason])
	}

	st, err := store.Stack(ctx, "kstack-1")
	require.NoError(t, err)
	require.Len(t, st.Items, 2)
	for _, id := range []string{"kstack-2", "kstack-3"} {
		_, err := store.Stack(ctx, id)
		require.True(t, voucher.IsCode(err, voucher.CodeReservationNotFound), "%s: %v", id, err)
	}
	used := map[string]int32{}
	for code := range limits {
		v, err := store.Voucher(ctx, code)
		require.NoError(t, err)
		used[code] = v.UsedCount
	}
	require.Equal(t, map[string]int32{"STACKA": 1, "STACKB": 1, "STACKC": 0}, used, "refused stacks took nothing, STACKA's use included")

	// A fresh group replays the topic: the store changes nothing.
	cfg.Group = uniqueGroup()
	replay := sum(drain(t, newConsumer(t, cfg, store), len(evs)))
	require.Equal(t, 1, replay.AlreadyApplied)
	require.Zero(t, replay.Applied)
	for code, n := range used {
		v, err := store.Voucher(ctx, code)
		require.NoError(t, err)
		require.Equal(t, n, v.UsedCount, code)
	}
	again, err := store.Stack(ctx, "kstack-1")
	require.NoError(t, err)
	require.Equal(t, st, again)
}

// A stack's event that replaces an order, through Kafka against the real
// store: applied once the replaced stack is written, it releases that
// stack whole and writes the new one in one transaction (the code in both
// keeps its count); a redelivery changes nothing.
func TestConsumerAppliesReplacingStackEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	store, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	require.NoError(t, store.Migrate(ctx))

	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, code := range []string{"RSA", "RSB", "RSC"} {
		_, err = store.CreateVoucher(ctx, voucher.Voucher{
			Code: code, DiscountAmount: 1000, TotalLimit: 1, PerUserLimit: 5, FlashSale: true,
			StartsAt: now.Add(-time.Hour), EndsAt: now.Add(24 * time.Hour), Stacking: voucher.Stacking{Stackable: true},
		})
		require.NoError(t, err)
	}
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 2)
	stack := func(orderID, replaces string, codes ...string) voucher.ReservedEvent {
		var e voucher.ReservedEvent
		left := int64(20_000)
		for i, code := range codes {
			h := voucher.Hold{OrderID: voucher.StackMemberOrderID(orderID, i+1), CustomerID: "42", OrderAmount: left,
				DiscountAmount: 1000, ReservedAt: now, ExpiresAt: now.Add(15 * time.Minute)}
			if i == 0 {
				e = voucher.EventFromHold(code, h)
			}
			e.Members = append(e.Members, voucher.StackEventMember{Code: code, CustomerID: "42", OrderID: h.OrderID,
				OrderAmount: left, DiscountAmount: h.DiscountAmount})
			left -= h.DiscountAmount
		}
		e.StackCustomerID, e.ReplacesOrderID = "42", replaces
		return e
	}
	l := newLog(t, cfg)
	c := newConsumer(t, cfg, store)
	require.NoError(t, l.PublishReserved(ctx, stack("krs-1", "", "RSA", "RSB")))
	require.Equal(t, 1, sum(drain(t, c, 1)).Applied)
	// Keyed by RSC: another partition than the replaced stack's, published
	// once that one is written (as a producer must).
	require.NoError(t, l.PublishReserved(ctx, stack("krs-2", "krs-1", "RSC", "RSB")))
	require.Equal(t, 1, sum(drain(t, c, 1)).Applied)

	old, err := store.Stack(ctx, "krs-1")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReleased, old.Status())
	st, err := store.Stack(ctx, "krs-2")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReserved, st.Status())
	used := map[string]int32{}
	for _, code := range []string{"RSA", "RSB", "RSC"} {
		v, err := store.Voucher(ctx, code)
		require.NoError(t, err)
		used[code] = v.UsedCount
	}
	require.Equal(t, map[string]int32{"RSA": 0, "RSB": 1, "RSC": 1}, used, "RSB's use moved, RSA's given back")

	// A fresh group replays the topic: the store changes nothing.
	cfg.Group = uniqueGroup()
	replay := sum(drain(t, newConsumer(t, cfg, store), 2))
	require.Equal(t, 2, replay.AlreadyApplied)
	for code, n := range used {
		v, err := store.Voucher(ctx, code)
		require.NoError(t, err)
		require.Equal(t, n, v.UsedCount, code)
	}
}
