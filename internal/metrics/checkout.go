package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/voucherd/voucherd/internal/voucher"
)

// checkoutMetrics count validations by answer and look-ups of unknown codes
// by API key (voucher.GuessObserver, voucher.ValidationObserver).
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
}

func newCheckoutMetrics(register func(prometheus.Collector)) checkoutMetrics {
	c := checkoutMetrics{
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
			Help: "Requests refused with 429 because their customer looked up too many unknown codes, by API key name.",
		}, []string{"key"}),
	}
	register(c.Validations)
	register(c.UnknownCodes)
	register(c.GuessRefusals)
	return c
}

// UnknownCode implements voucher.GuessObserver.
func (m *Metrics) UnknownCode(keyName string) { m.checkout.UnknownCodes.WithLabelValues(keyName).Inc() }

// GuessBlocked implements voucher.GuessObserver.
func (m *Metrics) GuessBlocked(keyName string) {
	m.checkout.GuessRefusals.WithLabelValues(keyName).Inc()
}

// Validated implements voucher.ValidationObserver.
func (m *Metrics) Validated(outcome string) { m.checkout.Validations.WithLabelValues(outcome).Inc() }

var (
	_ voucher.GuessObserver      = (*Metrics)(nil)
	_ voucher.ValidationObserver = (*Metrics)(nil)
)
