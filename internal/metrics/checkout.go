package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/voucherd/voucherd/internal/voucher"
)

// checkoutMetrics count validations by answer, refusals by reason
// (voucher.Observer's Validated and Refused), and look-ups of
// unknown codes and 429s for guessing by API key (observeGuessing).
type checkoutMetrics struct {
	// Validations counts validations by outcome: "valid", "replay", the
	// refusal's reason (the NOT_ELIGIBLE reason, else its code), or the
	// error code of a validation that got no answer.
	Validations *prometheus.CounterVec
	// UnknownCodes counts reservations and validations of codes that do
	// not exist, by API key name.
	UnknownCodes *prometheus.CounterVec
	// GuessRefusals counts reservations and validations refused with 429
	// because their customer looked up too many unknown codes, by API key
	// name.
	GuessRefusals *prometheus.CounterVec
	// Refusals counts refused reservations and validations by operation
	// and reason (voucher.Observer.Refused).
	Refusals *prometheus.CounterVec

	refusals      children[opReason, prometheus.Counter]
	unknownCodes  children[string, prometheus.Counter]
	guessRefusals children[string, prometheus.Counter]
}

type opReason struct{ op, reason string }

func newCheckoutMetrics(register func(prometheus.Collector)) *checkoutMetrics {
	c := &checkoutMetrics{
		Validations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voucherd", Name: "validations_total",
			Help: "Validations by outcome: valid, replay, or the reason a reservation would be refused.",
		}, []string{"outcome"}),
		UnknownCodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voucherd", Name: "unknown_code_lookups_total",
			Help: "Reservations and validations of voucher codes that do not exist, by API key name.",
		}, []string{"key"}),
		GuessRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voucherd", Name: "guess_refusals_total",
			Help: "Requests refused with 429 because their customer, client address or API key looked up too many unknown codes, by API key name.",
		}, []string{"key"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voucherd", Name: "refusals_total",
			Help: "Reservations and validations refused, by operation (reservation, validation) and reason: the NOT_ELIGIBLE or ALREADY_USED reason, else the error code (VOUCHER_NOT_FOUND, TOO_MANY_REQUESTS, OUT_OF_STOCK, ...).",
		}, []string{"op", "reason"}),
	}
	register(c.Validations)
	register(c.Refusals)
	register(c.UnknownCodes)
	register(c.GuessRefusals)
	return c
}

// The routes whose answers observeGuessing counts.
const (
	routeReserve  = "POST /vouchers/{code}/reservations"
	routeValidate = "POST /vouchers/{code}/validation"
)

// observeGuessing counts, by the API key's name, the reservations and
// validations that found no code (VOUCHER_NOT_FOUND) or were refused for
// guessing (TOO_MANY_REQUESTS). It counts at the HTTP layer, which knows
// the key without carrying it into the service.
func (m *Metrics) observeGuessing(route, key, outcome string) {
	if route != routeReserve && route != routeValidate {
		return
	}
	c := m.checkout
	switch outcome {
	case string(voucher.CodeVoucherNotFound):
		c.unknownCodes.get(key, func() prometheus.Counter { return c.UnknownCodes.WithLabelValues(key) }).Inc()
	case string(voucher.CodeTooManyRequests):
		c.guessRefusals.get(key, func() prometheus.Counter { return c.GuessRefusals.WithLabelValues(key) }).Inc()
	}
}

// Refused implements voucher.Observer.
func (m *Metrics) Refused(op, reason string) {
	k := opReason{op, reason}
	m.checkout.refusals.get(k, func() prometheus.Counter { return m.checkout.Refusals.WithLabelValues(k.op, k.reason) }).Inc()
}

// Validated implements voucher.Observer.
func (m *Metrics) Validated(outcome string) { m.checkout.Validations.WithLabelValues(outcome).Inc() }

var _ voucher.Observer = (*Metrics)(nil)
