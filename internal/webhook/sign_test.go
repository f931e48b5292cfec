package webhook_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/client"
	"github.com/voucherd/voucherd/internal/webhook"
)

// TestSignVerifiedByClient: the client's helper verifies what the server
// signs, and nothing altered.
func TestSignVerifiedByClient(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":7,"type":"reservation.confirmed","createdAt":"2026-12-04T10:00:00Z","data":{}}`)
	at := time.Unix(1_780_000_000, 0)
	sig := webhook.Sign("whsec_x", at, body)
	e, err := client.VerifyWebhook("whsec_x", sig, body, at.Add(time.Minute), 0)
	require.NoError(t, err)
	require.EqualValues(t, 7, e.ID)
	for _, bad := range []struct {
		secret, sig string
		body        []byte
		now         time.Time
	}{
		{"whsec_y", sig, body, at},
		{"whsec_x", sig, append([]byte{' '}, body...), at},
		{"whsec_x", sig, body, at.Add(time.Hour)},
		{"whsec_x", "v1=00", body, at},
		{"whsec_x", "", body, at},
	} {
		_, err := client.VerifyWebhook(bad.secret, bad.sig, bad.body, bad.now, 0)
		require.ErrorIs(t, err, client.ErrBadSignature)
	}
}
