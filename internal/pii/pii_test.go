package pii

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	r, err := New([]byte("0123456789abcdef"))
	require.NoError(t, err)
	h := r.Hash
	cases := []struct{ in, want string }{
		{"", ""},
		{"customer 42", "customer 42"},
		{"alice@example.com", h("alice@example.com")},
		{"/customers/alice@example.com/redemptions", "/customers/" + h("alice@example.com") + "/redemptions"},
		{"/customers/alice%40example.com/redemptions", "/customers/" + h("alice@example.com") + "/redemptions"},
		{"customer alice+promo@example.com.", "customer " + h("alice+promo@example.com") + "."},
		{"held by Bob.Smith@Example.COM: limit 1", "held by " + h("Bob.Smith@Example.COM") + ": limit 1"},
		{"shop:carol@example.org", h("shop:carol@example.org")},
		{"a@b and c@d", h("a@b") + " and " + h("c@d")},
		{`{"customerId":"dan@example.net"}`, `{"customerId":"` + h("dan@example.net") + `"}`},
		{"customer=erin@example.com,order=o1", "customer=" + h("erin@example.com") + ",order=o1"},
		// Not e-mail addresses: nothing on one side of the '@'.
		{"@handle", "@handle"},
		{"trailing@", "trailing@"},
		{"50%", "50%"},
		{"100%40", "100%40"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, r.Redact(tc.in), tc.in)
		require.NotContains(t, r.Redact(tc.in), "example.")
	}
	require.Regexp(t, `^email:[0-9a-f]{16}$`, h("alice@example.com"))

	// The hash is keyed: another key, another hash; the same key, the same.
	other, err := New([]byte("fedcba9876543210"))
	require.NoError(t, err)
	require.NotEqual(t, h("alice@example.com"), other.Hash("alice@example.com"))
	same, err := New([]byte("0123456789abcdef"))
	require.NoError(t, err)
	require.Equal(t, h("alice@example.com"), same.Hash("alice@example.com"))

	_, err = New([]byte("short"))
	require.Error(t, err)
	random, err := New(nil)
	require.NoError(t, err)
	require.Regexp(t, `^email:[0-9a-f]{16}$`, random.Redact("x@y"))
}

func TestHandlerRedactsEveryString(t *testing.T) {
	t.Parallel()
	r, err := New([]byte("0123456789abcdef"))
	require.NoError(t, err)
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil))).With("customer", "with@example.com")
	log.Info("refused alice@example.com", "err", errors.New("customer bob@example.com holds 1"),
		slog.Group("order", "customerId", "carol@example.com", "amount", 5),
		"path", stringer("/customers/dan@example.com"), "n", 3)
	out := buf.String()
	require.NotContains(t, out, "example.com")
	for _, email := range []string{"with@example.com", "alice@example.com", "bob@example.com", "carol@example.com", "dan@example.com"} {
		require.Contains(t, out, r.Hash(email))
	}
	require.Contains(t, out, `"amount":5`)
	require.Equal(t, 1, strings.Count(out, "\n"))
}

type stringer string

func (s stringer) String() string { return string(s) }
