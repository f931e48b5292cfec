package main

import (
	"flag"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/voucherd/voucherd/internal/httpapi"
	"github.com/voucherd/voucherd/internal/voucher"
)

// AccessConfig is who may reach what besides the API's own routes: read
// keys, where /metrics is served, and the checks that keep the profiler and
// placeholder tokens off the network.
type AccessConfig struct {
	// ReadKeys is a name:secret list of read keys (VOUCHERD_READ_KEYS).
	ReadKeys string
	// MetricsAddr, when set, serves /metrics on a listener of its own,
	// without a key, and not on the serving port. Empty serves it on the
	// serving port to read and admin keys only.
	MetricsAddr string
	// Rate limits (httpapi.RateLimits): requests a second and burst per
	// API key and per client address; a zero rate is no limit.
	RatePerKey, RatePerClient   float64
	BurstPerKey, BurstPerClient int
	// RateLimitLoopback applies the rate limits to loopback clients too.
	RateLimitLoopback bool
	// TrustedProxies is a comma-separated list of CIDRs (or addresses)
	// whose X-Forwarded-For is believed; trustedProxies is it parsed by
	// validateAccess.
	TrustedProxies string
	trustedProxies []netip.Prefix
	// UnknownCodeLimitPerClient and UnknownCodeLimitPerKey are the
	// code-guessing limit per client address and per API key
	// (voucher.ServiceConfig).
	UnknownCodeLimitPerClient, UnknownCodeLimitPerKey int
}

// maxHeaderBytes bounds a request's header on the serving port: far above
// what a client of this API sends, far below Go's 1 MB default.
const maxHeaderBytes = 64 << 10

// placeholderToken is the mark of the example secrets shipped in deploy/:
// a token holding it was never changed, and voucherd refuses to start.
const placeholderToken = "change-me"

func registerAccessFlags(fs *flag.FlagSet, c *AccessConfig) {
	c.ReadKeys = os.Getenv("VOUCHERD_READ_KEYS")
	fs.Float64Var(&c.RatePerKey, "rate-per-key", envFloat("VOUCHERD_RATE_PER_KEY", 0), "requests a second each API key may make on average; 0 (the default) is no limit (VOUCHERD_RATE_PER_KEY)")
	fs.IntVar(&c.BurstPerKey, "burst-per-key", envInt("VOUCHERD_BURST_PER_KEY", 0), "requests an API key may make at once above its rate; 0 means one second of the rate (VOUCHERD_BURST_PER_KEY)")
	fs.Float64Var(&c.RatePerClient, "rate-per-client", envFloat("VOUCHERD_RATE_PER_CLIENT", 0), "requests a second each client address may make on average, counted before authentication; 0 (the default) is no limit (VOUCHERD_RATE_PER_CLIENT)")
	fs.IntVar(&c.BurstPerClient, "burst-per-client", envInt("VOUCHERD_BURST_PER_CLIENT", 0), "requests a client address may make at once above its rate; 0 means one second of the rate (VOUCHERD_BURST_PER_CLIENT)")
	fs.BoolVar(&c.RateLimitLoopback, "rate-limit-loopback", envBool("VOUCHERD_RATE_LIMIT_LOOPBACK", false), "apply the per-key and per-client rate limits to loopback clients too (VOUCHERD_RATE_LIMIT_LOOPBACK)")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", envOr("VOUCHERD_TRUSTED_PROXIES", ""), "comma-separated CIDRs of proxies whose X-Forwarded-For is believed (its right-most address not in the list is the client); empty (the default): the client is the TCP peer (VOUCHERD_TRUSTED_PROXIES)")
	fs.IntVar(&c.UnknownCodeLimitPerClient, "unknown-code-limit-per-client", envInt("VOUCHERD_UNKNOWN_CODE_LIMIT_PER_CLIENT", voucher.DefaultUnknownCodeLimitPerClient), "look-ups of unknown voucher codes a client address may make per minute, whatever the customerIds, before its reservations and validations answer 429; loopback included; negative disables (VOUCHERD_UNKNOWN_CODE_LIMIT_PER_CLIENT)")
	fs.IntVar(&c.UnknownCodeLimitPerKey, "unknown-code-limit-per-key", envInt("VOUCHERD_UNKNOWN_CODE_LIMIT_PER_KEY", voucher.DefaultUnknownCodeLimitPerKey), "look-ups of unknown voucher codes an API key may make per minute before its reservations and validations answer 429; negative disables (VOUCHERD_UNKNOWN_CODE_LIMIT_PER_KEY)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", envOr("VOUCHERD_METRICS_ADDR", ""), "serve /metrics on this address of its own, without a key; empty (the default) serves it on the serving port to read and admin keys only (VOUCHERD_METRICS_ADDR)")
}

// validateAccess refuses placeholder tokens and a profiler address beyond
// the loopback interface.
func (c *Config) validateAccess() error {
	for _, t := range []struct{ env, val string }{
		{"VOUCHERD_API_TOKEN", c.APIToken}, {"VOUCHERD_ADMIN_TOKEN", c.AdminToken},
		{"VOUCHERD_API_KEYS", c.APIKeys}, {"VOUCHERD_ADMIN_KEYS", c.AdminKeys}, {"VOUCHERD_READ_KEYS", c.Access.ReadKeys},
	} {
		if strings.Contains(strings.ToLower(t.val), placeholderToken) {
			return fmt.Errorf("%s holds the placeholder %q: set a secret of your own", t.env, placeholderToken)
		}
	}
	c.Access.trustedProxies = nil
	for _, item := range splitList(c.Access.TrustedProxies) {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			a, aerr := netip.ParseAddr(item)
			if aerr != nil {
				return fmt.Errorf("--trusted-proxies: %q is not a CIDR or an address", item)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		c.Access.trustedProxies = append(c.Access.trustedProxies, p.Masked())
	}
	if c.Access.RatePerKey < 0 || c.Access.RatePerClient < 0 || c.Access.BurstPerKey < 0 || c.Access.BurstPerClient < 0 {
		return fmt.Errorf("rate limits and bursts must not be negative")
	}
	if c.PprofAddr != "" && !loopbackAddr(c.PprofAddr) {
		return fmt.Errorf("--pprof-addr %q must be a loopback address (like 127.0.0.1:6060): the profiler shows memory and may be slowed down at will", c.PprofAddr)
	}
	return nil
}

// loopbackAddr reports whether host:port listens on the loopback interface
// only: "localhost" or a loopback IP; an empty host means every interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// rateLimits is the httpapi form of the rate limits; a burst of 0 is one
// second of the rate.
func (c AccessConfig) rateLimits(onLimited func(limit string)) httpapi.RateLimits {
	rate := func(perSecond float64, burst int) httpapi.Rate {
		if burst == 0 {
			burst = int(math.Ceil(perSecond))
		}
		return httpapi.Rate{PerSecond: perSecond, Burst: burst}
	}
	return httpapi.RateLimits{
		PerKey: rate(c.RatePerKey, c.BurstPerKey), PerClient: rate(c.RatePerClient, c.BurstPerClient),
		Loopback: c.RateLimitLoopback, TrustedProxies: c.trustedProxies, OnLimited: onLimited,
	}
}
