package metrics

import "github.com/prometheus/client_golang/prometheus"

// AccessMetrics are the collectors of who may call the API: the keys file
// and the rate limits.
type AccessMetrics struct {
	// KeysFileErrors counts keys-file reads refused (missing, unreadable,
	// malformed or invalid content), once per distinct content.
	KeysFileErrors prometheus.Counter
	// KeysFileUsable is 1 while the keys in use include the keys file's
	// (or there is no keys file), 0 while its keys are refused.
	KeysFileUsable prometheus.Gauge
	// RateLimited counts requests answered 429 by a rate limit, by limit
	// ("key" or "client").
	RateLimited *prometheus.CounterVec
}

func newAccessMetrics(register func(prometheus.Collector)) *AccessMetrics {
	a := &AccessMetrics{
		KeysFileErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voucherd", Name: "keys_file_errors_total",
			Help: "Keys file reads refused (missing, unreadable or invalid); while refused, none of its keys is accepted.",
		}),
		KeysFileUsable: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "voucherd", Name: "keys_file_usable",
			Help: "1 while the keys file's keys are in use (or there is no keys file), 0 while the file is refused.",
		}),
		RateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voucherd", Name: "rate_limited_total",
			Help: "Requests answered 429 by a rate limit, by limit (key or client).",
		}, []string{"limit"}),
	}
	a.KeysFileUsable.Set(1)
	for _, c := range []prometheus.Collector{a.KeysFileErrors, a.KeysFileUsable, a.RateLimited} {
		register(c)
	}
	return a
}
