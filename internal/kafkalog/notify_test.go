package kafkalog

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

func sampleThreshold(typ voucher.ThresholdType, code string) voucher.ThresholdEvent {
	return voucher.ThresholdEvent{
		Type: typ, Code: code, TotalLimit: 100, Remaining: 9, Threshold: 10, OrderID: "o-91",
		Mode: voucher.ModeStandard, At: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	}
}

func TestThresholdEventWireFormat(t *testing.T) {
	t.Parallel()
	e := sampleThreshold(voucher.ThresholdLowStock, "SALE")
	b, err := encodeThreshold(e)
	require.NoError(t, err)
	require.JSONEq(t, `{"version":1,"type":"VoucherLowStock","code":"SALE","totalLimit":100,"remaining":9,
		"threshold":10,"orderId":"o-91","mode":"standard","at":"2026-12-01T10:00:00Z"}`, string(b))
	got, err := DecodeThresholdEvent(b)
	require.NoError(t, err)
	require.Equal(t, e, got)

	for _, bad := range []string{`{`, `{"version":1,"type":"Nope"}`, `{"version":2,"type":"VoucherSoldOut"}`} {
		_, err := DecodeThresholdEvent([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestNotifierPublishes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers := testenv.Kafka(t).Brokers
	cfg := testConfig(t, brokers, 1)
	cfg.EventsTopic = testenv.Topic(t, brokers, 2)
	n, err := NewNotifier(cfg)
	require.NoError(t, err)
	t.Cleanup(n.Close)
	require.NoError(t, n.EnsureTopic(ctx), "an existing topic is fine")

	sent := []voucher.ThresholdEvent{
		sampleThreshold(voucher.ThresholdLowStock, "A"),
		sampleThreshold(voucher.ThresholdSoldOut, "A"),
		sampleThreshold(voucher.ThresholdLowStock, "B"),
	}
	for _, e := range sent {
		n.Notify(e)
	}
	recs := consume(t, brokers, cfg.EventsTopic, len(sent))
	byCode := map[string][]voucher.ThresholdType{}
	for _, r := range recs {
		e, err := DecodeThresholdEvent(r.Value)
		require.NoError(t, err)
		require.Equal(t, e.Code, string(r.Key), "keyed by voucher code")
		byCode[e.Code] = append(byCode[e.Code], e.Type)
	}
	require.Equal(t, []voucher.ThresholdType{voucher.ThresholdLowStock, voucher.ThresholdSoldOut}, byCode["A"], "in order per voucher")
	require.Equal(t, []voucher.ThresholdType{voucher.ThresholdLowStock}, byCode["B"])
	require.Eventually(t, func() bool { s, _ := n.Stats(); return s == 3 }, 10*time.Second, 20*time.Millisecond)
}

// A broker that does not answer never blocks Notify; the events are
// dropped after EventsDelivery, or at once when the buffer is full.
func TestNotifierNeverBlocks(t *testing.T) {
	t.Parallel()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, EventsBuffer: 2, EventsDelivery: time.Second,
		ProduceTimeout: 100 * time.Millisecond}
	n, err := NewNotifier(cfg)
	require.NoError(t, err)
	began := time.Now()
	for range 5 {
		n.Notify(sampleThreshold(voucher.ThresholdSoldOut, "X"))
	}
	require.Less(t, time.Since(began), 100*time.Millisecond)
	require.Eventually(t, func() bool { _, lost := n.Stats(); return lost >= 3 }, 2*time.Second, 10*time.Millisecond,
		"the buffer holds 2; the others are dropped at once")
	require.Eventually(t, func() bool { _, lost := n.Stats(); return lost == 5 }, 5*time.Second, 10*time.Millisecond,
		"the buffered ones after EventsDelivery")
	n.Close()
	sent, lost := n.Stats()
	require.Zero(t, sent)
	require.Equal(t, uint64(5), lost)
}
