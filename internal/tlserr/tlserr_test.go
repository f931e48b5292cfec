package tlserr

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPermanent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"unknown authority", x509.UnknownAuthorityError{}, true},
		{"wrong host name, wrapped", fmt.Errorf("dial: %w", x509.HostnameError{Host: "x"}), true},
		{"invalid certificate", x509.CertificateInvalidError{}, true},
		{"verification", &tls.CertificateVerificationError{Err: errors.New("bad")}, true},
		{"plain listener", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true},
		{"alert from the peer", &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, true},
		{"refused connection", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{"anything else", errors.New("timeout"), false},
		{"nil", nil, false},
	} {
		require.Equal(t, tc.want, Permanent(tc.err), tc.name)
	}
}
