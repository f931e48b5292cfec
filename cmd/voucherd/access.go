package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
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
}

// maxHeaderBytes bounds a request's header on the serving port: far above
// what a client of this API sends, far below Go's 1 MB default.
const maxHeaderBytes = 64 << 10

// placeholderToken is the mark of the example secrets shipped in deploy/:
// a token holding it was never changed, and voucherd refuses to start.
const placeholderToken = "change-me"

func registerAccessFlags(fs *flag.FlagSet, c *AccessConfig) {
	c.ReadKeys = os.Getenv("VOUCHERD_READ_KEYS")
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
