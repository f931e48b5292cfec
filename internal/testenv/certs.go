package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are a throwaway certificate authority and certificates it signed,
// as PEM files in a folder of the test, for servers started with TLS and
// the clients that check them. They are made in Go, so tests need no
// openssl.
type Certs struct {
	// CAFile is the authority's certificate.
	CAFile string
	// ServerCert and ServerKey are valid for 127.0.0.1, ::1 and localhost,
	// as a server and as a client (Redis Cluster nodes show it to each
	// other).
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client certificate (CN "voucherd").
	ClientCert, ClientKey string
	// OtherCAFile is the certificate of an unrelated authority, which
	// signed none of the above: a client trusting it must refuse the
	// servers.
	OtherCAFile string
	// Pool holds the authority's certificate.
	Pool *x509.CertPool
}

// NewCerts makes a CA, a server and a client certificate valid for an
// hour, in t.TempDir(). The files are readable by everyone (keys too): a
// server that runs as another user, or insists on owning its key, gets a
// copy.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(1)
	template := func(cn string) *x509.Certificate {
		serial++
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    time.Now().Add(-time.Minute),
			NotAfter:     time.Now().Add(time.Hour),
		}
	}
	sign := func(tmpl, parent *x509.Certificate, pub any, key *ecdsa.PrivateKey) []byte {
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	newCA := func(cn string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key := newKey()
		tmpl := template(cn)
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
		der := sign(tmpl, tmpl, &key.PublicKey, key)
		ca, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return ca, key, der
	}
	leaf := func(cn string, usage x509.ExtKeyUsage, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certName, keyName string) (string, string) {
		key := newKey()
		tmpl := template(cn)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(certName, "CERTIFICATE", sign(tmpl, ca, &key.PublicKey, caKey)), write(keyName, "PRIVATE KEY", keyDER)
	}
	ca, caKey, caDER := newCA("voucherd test CA")
	_, _, otherDER := newCA("unrelated test CA")
	c := &Certs{CAFile: write("ca.pem", "CERTIFICATE", caDER), OtherCAFile: write("other-ca.pem", "CERTIFICATE", otherDER),
		Pool: x509.NewCertPool()}
	c.Pool.AddCert(ca)
	c.ServerCert, c.ServerKey = leaf("localhost", x509.ExtKeyUsageServerAuth, ca, caKey, "server.pem", "server-key.pem")
	c.ClientCert, c.ClientKey = leaf("voucherd", x509.ExtKeyUsageClientAuth, ca, caKey, "client.pem", "client-key.pem")
	return c
}
