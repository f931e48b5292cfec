// Package tlserr tells the TLS failures of a dependency's connection that a
// retry cannot fix from those that pass, for the adapters and the start of
// voucherd, which stop on the first kind and retry the second.
package tlserr

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
)

// Permanent reports whether err is a TLS handshake failure that a retry
// cannot fix: the peer's certificate did not verify (unknown authority,
// wrong host name, invalid), the peer refused ours or wanted one (a TLS
// alert from it), or the peer does not speak TLS.
func Permanent(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	oe, ok := errors.AsType[*net.OpError](err)
	return ok && oe.Op == "remote error" // a TLS alert from the peer
}
