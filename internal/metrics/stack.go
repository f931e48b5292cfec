package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voucherd/voucherd/internal/voucher"
)

// stackMetrics count reservations of orders of several codes
// (voucher.Observer's Stacked): their outcome by the position of the code
// that refused them, and the uses the gate gave back for partial stacks.
type stackMetrics struct {
	// Reservations counts them by mode, number of codes, outcome ("ok" or
	// the error code) and failed_position (the refused code's place in
	// the order given, 1 to 5; "0" when no code is named).
	Reservations *prometheus.CounterVec
	// GiveBacks counts, by mode, the uses the gate had taken for a stack
	// and gave back before answering (a later code refused, or the store).
	GiveBacks *prometheus.CounterVec

	reservations children[stackKey, prometheus.Counter]
	giveBacks    children[voucher.Mode, prometheus.Counter]
}

type stackKey struct {
	mode            voucher.Mode
	codes, position int
	outcome         string
}

func newStackMetrics(register func(prometheus.Collector)) *stackMetrics {
	s := &stackMetrics{
		Reservations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voucherd", Name: "stack_reservations_total",
			Help: "Reservations of orders of several codes, by mode, number of codes, outcome (ok or the error code) and the position of the code that refused them (0: none named).",
		}, []string{"mode", "codes", "outcome", "failed_position"}),
		GiveBacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voucherd", Name: "stack_give_backs_total",
			Help: "Uses the gate had taken for an order of several codes and gave back before answering, because a later code or the store refused it, by mode.",
		}, []string{"mode"}),
	}
	register(s.Reservations)
	register(s.GiveBacks)
	return s
}

// Stacked implements voucher.Observer.
func (m *Metrics) Stacked(mode voucher.Mode, codes int, code voucher.ErrorCode, failedPosition, gaveBack int) {
	k := stackKey{mode: mode, codes: codes, position: failedPosition, outcome: string(code)}
	if code == "" {
		k.outcome = "ok"
	}
	m.stack.reservations.get(k, func() prometheus.Counter {
		return m.stack.Reservations.WithLabelValues(string(mode), strconv.Itoa(codes), k.outcome, strconv.Itoa(failedPosition))
	}).Inc()
	if gaveBack > 0 {
		m.stack.giveBacks.get(mode, func() prometheus.Counter {
			return m.stack.GiveBacks.WithLabelValues(string(mode))
		}).Add(float64(gaveBack))
	}
}
