package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/pii"
)

// TestCustomerEmailsStayOutOfLogsAndSpans: a reservation whose customerId
// is an e-mail address, the customer's redemptions read by URL, and a dead
// letter whose reason names the customer leave no e-mail address in the
// captured logs or the exported spans; the keyed hash stands in for it, the
// same in both.
func TestCustomerEmailsStayOutOfLogsAndSpans(t *testing.T) {
	t.Parallel()
	const key = "pii-test-key-0123456789"
	s := newTracedStack(t, stackOptions{kafka: true, tweak: func(c *Config) { c.PIIKey = key }})
	red, err := pii.New([]byte(key))
	require.NoError(t, err)
	flash := true
	code := s.createVoucher(voucherSpec{TotalLimit: 5, Flash: &flash})

	r := s.do(http.MethodPost, "/vouchers/"+code+"/reservations",
		`{"customerId":"alice@example.com","orderId":"pii-1","orderAmount":5000}`)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	s.settle(code, 1)
	r = s.doToken(http.MethodGet, "/customers/alice@example.com/redemptions", nil, testAdminToken)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Contains(t, string(r.raw), "alice@example.com", "the answer itself keeps the id")

	// Another customer's event for the same order, written by hand: the
	// store refuses it, and the consumer's warning names both customers.
	now := time.Now().UTC()
	ev := fmt.Sprintf(`{"version":1,"type":"VoucherReserved","code":%q,"customerId":"bob@example.com","orderId":"pii-1",`+
		`"orderAmount":5000,"discountAmount":1000,"reservedAt":%q,"expiresAt":%q}`,
		code, now.Format(time.RFC3339Nano), now.Add(time.Minute).Format(time.RFC3339Nano))
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.cfg.KafkaBrokers...))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: s.cfg.KafkaTopic, Key: []byte(code), Value: []byte(ev)}).FirstErr())
	require.Eventually(t, func() bool { return strings.Contains(s.logs.String(), "order_conflict") },
		30*time.Second, 50*time.Millisecond, "the dead letter's warning")

	require.NoError(t, s.app.tracing.ForceFlush(context.Background()))
	spans := fmt.Sprintf("%+v", s.spans.GetSpans())
	logs := s.logs.String()
	for _, text := range []string{spans, logs} {
		require.NotContains(t, text, "example.com")
	}
	require.Contains(t, spans, "/customers/"+red.Hash("alice@example.com")+"/redemptions", "the URL path, hashed")
	require.Contains(t, logs, "customer "+red.Hash("alice@example.com"), "the dead letter's reason, hashed")
}

// With VOUCHERD_EVENT_KEY, Kafka mode signs its events and the consumer
// applies them; an unsigned event written by hand is refused.
func TestKafkaSignedEvents(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true, kafka: true, tweak: func(c *Config) {
		c.EventKey = "event-key-0123456789abcdef0123456789"
	}})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	r := s.reserve(code, 1, "signed-1", 5000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	s.settle(code, 1)

	now := time.Now().UTC()
	ev := fmt.Sprintf(`{"version":1,"type":"VoucherReserved","code":%q,"customerId":"2","orderId":"unsigned-1",`+
		`"orderAmount":5000,"discountAmount":1000,"reservedAt":%q,"expiresAt":%q}`,
		code, now.Format(time.RFC3339Nano), now.Add(time.Minute).Format(time.RFC3339Nano))
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.cfg.KafkaBrokers...))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: s.cfg.KafkaTopic, Key: []byte(code), Value: []byte(ev)}).FirstErr())
	require.Eventually(t, func() bool {
		st := s.app.kafka.consumer.Stats()
		return st.Mismatched["bad_signature"] == 1
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, s.state(code).reserved, "only the signed reservation")
}
