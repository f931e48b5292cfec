package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"unicode/utf8"

	"github.com/voucherd/voucherd/internal/voucher"
)

// A webhook URL names a host the server resolves and calls: without checks
// an admin key (or whoever holds one) could make voucherd call its own
// network. A URL must be https and every address its host resolves to must
// be public; the check is made at creation and again on each connection
// (the dialer's Control sees the address actually dialled, so a name that
// resolves differently later is caught). AllowPrivate lifts both rules.

// refusedAddr reports why ip may not be called ("" when it may).
func refusedAddr(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip.Is4() && cgNAT.Contains(ip):
		return "private"
	}
	return ""
}

// cgNAT is the shared address space of carrier-grade NAT (RFC 6598).
var cgNAT = netip.MustParsePrefix("100.64.0.0/10")

// errRefused marks a connection the dialer would not make.
var errRefused = errors.New("webhook: address refused")

// CheckURL validates a webhook URL: absolute and parseable, https (or http
// with allowPrivate), no user info, and with allowPrivate false a host that
// resolves only to public addresses. It answers CodeWebhookURLRefused.
func CheckURL(ctx context.Context, resolver *net.Resolver, raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Hostname() == "" {
		return voucher.Errorf(voucher.CodeWebhookURLRefused, "url must be an absolute URL voucherd can parse")
	}
	if u.User != nil {
		return voucher.Errorf(voucher.CodeWebhookURLRefused, "url must not carry user information")
	}
	if utf8.RuneCountInString(raw) > 2048 {
		return voucher.Errorf(voucher.CodeWebhookURLRefused, "url must be at most 2048 characters")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	default:
		return voucher.Errorf(voucher.CodeWebhookURLRefused, "url must be https")
	}
	if allowPrivate {
		return nil
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		ips, err := resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return voucher.Errorf(voucher.CodeWebhookURLRefused, "url host %s does not resolve", host)
		}
		addrs = ips
	}
	for _, ip := range addrs {
		if why := refusedAddr(ip); why != "" {
			return voucher.Errorf(voucher.CodeWebhookURLRefused, "url host %s resolves to a %s address (%s)", host, why, ip)
		}
	}
	return nil
}

// control is a net.Dialer Control refusing non-public addresses.
func control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", errRefused, address)
	}
	if why := refusedAddr(ap.Addr()); why != "" {
		return fmt.Errorf("%w: %s is a %s address", errRefused, ap.Addr(), why)
	}
	return nil
}
