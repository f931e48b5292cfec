package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WebhookMetrics are the collectors of webhook deliveries; they implement
// webhook.Observer.
type WebhookMetrics struct {
	// Deliveries counts attempts by outcome: delivered, retry, failed.
	Deliveries *prometheus.CounterVec
	// Lag is the time from an event's commit to its delivery.
	Lag prometheus.Histogram
}

// lagBuckets cover 10ms to about 3 days: a healthy receiver within a
// second, a receiver down for hours at the far end.
var lagBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 72 * 3600}

// NewWebhookMetrics registers the webhook collectors on reg.
func NewWebhookMetrics(reg prometheus.Registerer) *WebhookMetrics {
	w := &WebhookMetrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voucherd", Name: "webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome (delivered, retry, failed).",
		}, []string{"outcome"}),
		Lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "voucherd", Name: "webhook_delivery_lag_seconds",
			Help: "Time from an event's commit to its delivery to a webhook.", Buckets: lagBuckets,
		}),
	}
	reg.MustRegister(w.Deliveries, w.Lag)
	return w
}

// WebhookDelivery implements webhook.Observer.
func (w *WebhookMetrics) WebhookDelivery(outcome string, lag time.Duration) {
	w.Deliveries.WithLabelValues(outcome).Inc()
	if outcome == "delivered" {
		w.Lag.Observe(lag.Seconds())
	}
}
