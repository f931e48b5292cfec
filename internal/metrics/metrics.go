// Package metrics owns voucherd's Prometheus metrics: one registry, the
// collectors, and the adapters that feed them from the service (as a
// voucher.Observer) and from the HTTP layer (as an httpapi.Metrics).
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/voucherd/voucherd/internal/voucher"
)

// latencyBuckets cover 100µs to 5s: flash answers sit at the low end,
// durable PostgreSQL writes under contention at the high end.
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Metrics holds every collector of the process.
type Metrics struct {
	Registry *prometheus.Registry

	RequestDuration  *prometheus.HistogramVec
	Reservations     *prometheus.CounterVec
	ReserveDuration  *prometheus.HistogramVec
	GateDecisions    *prometheus.CounterVec
	SoldOutCacheHits prometheus.CounterFunc
	StatementReruns  prometheus.CounterFunc
	Compensations    *prometheus.CounterVec
	ExpiryReleases   prometheus.Counter
	DependencyErrors *prometheus.CounterVec
	DependencyTime   *prometheus.HistogramVec
	ConsumerLag      prometheus.Gauge
	DeadLetters      prometheus.Counter
	ConsumerApplied  *prometheus.CounterVec
	Drift            *prometheus.GaugeVec
	DriftRepairs     *prometheus.CounterVec
	ThresholdEvents  *prometheus.CounterVec
	// ConsumerMismatches counts the records the consumer refused before
	// applying them (dead-lettered, never applied), by reason: an event
	// that disagrees with its voucher (voucher.Mismatch*), a record
	// without a valid signature (kafkalog.MismatchSignature).
	ConsumerMismatches *prometheus.CounterVec
	// Access holds the keys-file and rate-limit collectors (access.go).
	Access *AccessMetrics

	// BudgetRemaining and BudgetDrift are, per flash voucher with a money
	// budget, what PostgreSQL has left of it and the drift of the gate's
	// counter (ReconcileReport.BudgetDrift), at the last reconciliation.
	BudgetRemaining *prometheus.GaugeVec
	BudgetDrift     *prometheus.GaugeVec
	// WindowDrift is, per flash voucher with a quota per window, the sum
	// of the drifts of its occurrences' gate counters
	// (ReconcileReport.Windows) at the last reconciliation.
	WindowDrift *prometheus.GaugeVec

	// CombinedFlushes, CombinedReservations and CombinedFlushSeconds are
	// the write combiner's totals: their rates give the mean batch size
	// and the mean latency of a flush (Counts).
	CombinedFlushes      prometheus.CounterFunc
	CombinedReservations prometheus.CounterFunc
	CombinedFlushSeconds prometheus.CounterFunc

	// Children of the vectors observed on every request (children.go).
	requestDuration children[requestKey, prometheus.Observer]
	reservations    children[modeOutcome, reserveChildren]
	gateDecisions   children[string, prometheus.Counter]
	dependencyTime  children[depOp, prometheus.Observer]
	dependencyErrs  children[depOp, prometheus.Counter]

	checkout *checkoutMetrics
	stack    *stackMetrics
}

// Counts are counters kept by other packages, read at each scrape; a nil
// func reads as zero.
type Counts struct {
	// SoldOutHits reads the gate's local sold-out cache hit count (nil when
	// there is no gate).
	SoldOutHits func() uint64
	// StatementReruns reads how many PostgreSQL write statements were run
	// again after the server rolled them back (pgstore.Store.StatementReruns).
	StatementReruns func() uint64

	// CombinedFlushes, CombinedReservations and CombinedFlushSeconds read
	// the write combiner's totals (pgstore.Store.CombinerStats): the
	// transactions written, the reservations in them, and the seconds from
	// sending each one to its answer.
	CombinedFlushes      func() uint64
	CombinedReservations func() uint64
	CombinedFlushSeconds func() float64
}

// New registers the collectors on a fresh registry.
func New(counts Counts) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{Registry: reg}
	m.RequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "voucherd", Name: "http_request_duration_seconds",
		Help:    "HTTP request latency by route, API key name (never the secret), outcome (ok or error code) and status.",
		Buckets: latencyBuckets,
	}, []string{"route", "key", "outcome", "status"})
	m.Reservations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "reservations_total",
		Help: "Reserve calls by path (standard, flash-sync, flash-kafka) and outcome (ok, replay or error code).",
	}, []string{"mode", "outcome"})
	m.ReserveDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "voucherd", Name: "reserve_duration_seconds",
		Help: "Reserve latency inside the service by path and outcome.", Buckets: latencyBuckets,
	}, []string{"mode", "outcome"})
	m.GateDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "gate_decisions_total", Help: "Redis gate answers by outcome.",
	}, []string{"outcome"})
	m.SoldOutCacheHits = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "soldout_cache_hits_total",
		Help: "Reservations answered OUT_OF_STOCK from the in-process sold-out cache without calling Redis.",
	}, readCount(counts.SoldOutHits))
	m.StatementReruns = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "postgres_statement_reruns_total",
		Help: "PostgreSQL write statements run again because the server rolled them back for a reason of its own (deadlock, serialization failure, multixact check).",
	}, readCount(counts.StatementReruns))
	m.CombinedFlushes = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "postgres_combined_flushes_total",
		Help: "Transactions the write combiner sent (a batch of one included).",
	}, readCount(counts.CombinedFlushes))
	m.CombinedReservations = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "postgres_combined_reservations_total",
		Help: "Reservations the write combiner sent; divided by the flushes, the mean batch size.",
	}, readCount(counts.CombinedReservations))
	m.CombinedFlushSeconds = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "postgres_combined_flush_seconds_total",
		Help: "Seconds from sending each combined write to its answer, commit included; divided by the flushes, the mean flush latency.",
	}, func() float64 {
		if counts.CombinedFlushSeconds == nil {
			return 0
		}
		return counts.CombinedFlushSeconds()
	})
	m.Compensations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "gate_compensations_total",
		Help: "Uses given back to the gate because the durable write failed.",
	}, []string{"mode"})
	m.ExpiryReleases = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "expiry_releases_total", Help: "Reservations released by the expiry job.",
	})
	m.DependencyErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "dependency_errors_total", Help: "Errors talking to postgres, redis or kafka.",
	}, []string{"dependency", "op"})
	m.DependencyTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "voucherd", Name: "dependency_duration_seconds",
		Help: "Latency of calls to postgres, redis and kafka by operation.", Buckets: latencyBuckets,
	}, []string{"dependency", "op"})
	m.ConsumerLag = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "voucherd", Name: "consumer_lag_events", Help: "Reservation events not yet applied to PostgreSQL.",
	})
	m.DeadLetters = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "dead_letters_total", Help: "Events sent to the dead-letter topic.",
	})
	m.ConsumerApplied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "consumer_events_total", Help: "Events the consumer handled, by result.",
	}, []string{"result"})
	m.ConsumerMismatches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "consumer_mismatched_events_total",
		Help: "Reservation records dead-lettered before they were applied: events that disagree with their voucher, or without a valid signature, by reason.",
	}, []string{"reason"})
	m.Drift = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "voucherd", Name: "reconciliation_drift",
		Help: "Redis remaining minus (totalLimit - held in PostgreSQL) per voucher at the last reconciliation; negative is undersell.",
	}, []string{"code"})
	m.BudgetRemaining = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "voucherd", Name: "budget_remaining",
		Help: "Money left of a flash voucher's budget in minor units (budgetAmount - held discounts in PostgreSQL) at the last reconciliation.",
	}, []string{"code"})
	m.BudgetDrift = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "voucherd", Name: "budget_drift",
		Help: "Held discounts in PostgreSQL minus the gate's budget counter per voucher at the last reconciliation; positive means Redis would give out more money.",
	}, []string{"code"})
	m.WindowDrift = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "voucherd", Name: "window_drift",
		Help: "Uses held in PostgreSQL minus the gate's counters, summed over a voucher's occurrences of its windows that differ, at the last reconciliation; positive means Redis would hand out more.",
	}, []string{"code"})
	m.DriftRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "reconciliation_repairs_total", Help: "Repairs made by reconciliation, by kind.",
	}, []string{"kind"})
	m.ThresholdEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "voucherd", Name: "threshold_events_total", Help: "Low-stock and sold-out crossings, by type.",
	}, []string{"type"})
	for _, c := range []prometheus.Collector{m.RequestDuration, m.Reservations, m.ReserveDuration, m.GateDecisions,
		m.SoldOutCacheHits, m.StatementReruns, m.Compensations, m.ExpiryReleases, m.DependencyErrors, m.DependencyTime,
		m.ConsumerLag, m.DeadLetters, m.ConsumerApplied, m.ConsumerMismatches, m.Drift, m.DriftRepairs, m.ThresholdEvents,
		m.BudgetRemaining, m.BudgetDrift, m.WindowDrift, m.CombinedFlushes, m.CombinedReservations, m.CombinedFlushSeconds} {
		f(c)
	}
	m.checkout = newCheckoutMetrics(f)
	m.stack = newStackMetrics(f)
	m.Access = newAccessMetrics(f)
	return m
}

// readCount adapts a count read to a CounterFunc's function; nil reads zero.
func readCount(read func() uint64) func() float64 {
	if read == nil {
		return func() float64 { return 0 }
	}
	return func() float64 { return float64(read()) }
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// ObserveRequest implements httpapi.Metrics.
func (m *Metrics) ObserveRequest(route, key, outcome string, status int, d time.Duration) {
	m.requestDuration.get(requestKey{route, key, outcome, status}, func() prometheus.Observer {
		return m.RequestDuration.WithLabelValues(route, key, outcome, statusText(status))
	}).Observe(d.Seconds())
	m.observeGuessing(route, key, outcome)
}

// Reserved implements voucher.Observer.
func (m *Metrics) Reserved(_ string, mode voucher.Mode, code voucher.ErrorCode, replay bool, d time.Duration) {
	outcome := string(code)
	switch {
	case code == "" && replay:
		outcome = "replay"
	case code == "":
		outcome = "ok"
	}
	k := modeOutcome{string(mode), outcome}
	c := m.reservations.get(k, func() reserveChildren {
		return reserveChildren{m.Reservations.WithLabelValues(k.mode, k.outcome), m.ReserveDuration.WithLabelValues(k.mode, k.outcome)}
	})
	c.count.Inc()
	c.duration.Observe(d.Seconds())
}

// GateDecided implements voucher.Observer.
func (m *Metrics) GateDecided(o voucher.GateOutcome) {
	s := o.String()
	m.gateDecisions.get(s, func() prometheus.Counter { return m.GateDecisions.WithLabelValues(s) }).Inc()
}

// Expired implements voucher.Observer.
func (m *Metrics) Expired(n int) { m.ExpiryReleases.Add(float64(n)) }

// Compensated implements voucher.Observer.
func (m *Metrics) Compensated(mode voucher.Mode) { m.Compensations.WithLabelValues(string(mode)).Inc() }

// Threshold implements voucher.Observer: one count per crossing, by event
// type (VoucherLowStock, VoucherSoldOut).
func (m *Metrics) Threshold(e voucher.ThresholdEvent) {
	m.ThresholdEvents.WithLabelValues(string(e.Type)).Inc()
}

// ObserveDependency records one call to a dependency.
func (m *Metrics) ObserveDependency(dep, op string, d time.Duration, err error) {
	k := depOp{dep, op}
	m.dependencyTime.get(k, func() prometheus.Observer { return m.DependencyTime.WithLabelValues(dep, op) }).Observe(d.Seconds())
	if err != nil {
		m.dependencyErrs.get(k, func() prometheus.Counter { return m.DependencyErrors.WithLabelValues(dep, op) }).Inc()
	}
}

func statusText(s int) string {
	const digits = "0123456789"
	if s < 100 || s > 999 {
		return "0"
	}
	return string([]byte{digits[s/100], digits[s/10%10], digits[s%10]})
}
