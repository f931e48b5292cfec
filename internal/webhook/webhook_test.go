package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func TestCheckURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		url          string
		allowPrivate bool
		code         voucher.ErrorCode
	}{
		{"https://93.184.215.14/hook", false, ""},
		{"https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/hook", false, ""},
		{"http://93.184.215.14/hook", false, voucher.CodeWebhookURLRefused},
		{"https://127.0.0.1/hook", false, voucher.CodeWebhookURLRefused},
		{"https://10.0.0.8/hook", false, voucher.CodeWebhookURLRefused},
		{"https://172.16.3.4/hook", false, voucher.CodeWebhookURLRefused},
		{"https://192.168.1.1/hook", false, voucher.CodeWebhookURLRefused},
		{"https://169.254.169.254/latest/meta-data", false, voucher.CodeWebhookURLRefused},
		{"https://100.64.0.1/hook", false, voucher.CodeWebhookURLRefused},
		{"https://[::1]/hook", false, voucher.CodeWebhookURLRefused},
		{"https://[fe80::1]/hook", false, voucher.CodeWebhookURLRefused},
		{"https://[fd00::1]/hook", false, voucher.CodeWebhookURLRefused},
		{"https://[::ffff:127.0.0.1]/hook", false, voucher.CodeWebhookURLRefused},
		{"https://0.0.0.0/hook", false, voucher.CodeWebhookURLRefused},
		{"https://localhost/hook", false, voucher.CodeWebhookURLRefused},
		{"http://127.0.0.1:8080/hook", true, ""},
		{"ftp://example.com/", true, voucher.CodeWebhookURLRefused},
		{"https://user:pw@example.com/", false, voucher.CodeWebhookURLRefused},
		{"/relative", false, voucher.CodeWebhookURLRefused},
		{"https://[45]/", true, voucher.CodeWebhookURLRefused},
	} {
		err := CheckURL(ctx, nil, tc.url, tc.allowPrivate)
		require.Equal(t, tc.code, voucher.CodeOf(err), "%s: %v", tc.url, err)
	}
}

// TestDialRefusesPrivateAddresses: the delivery transport checks the
// address it connects to, whatever the URL's host resolved to at creation.
func TestDialRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	r, err := NewRunner(Config{Store: nopStore{}, AllowPrivate: true})
	require.NoError(t, err)
	status, err := r.post(context.Background(), voucher.DeliveryJob{URL: srv.URL, Event: voucher.Event{ID: 1}})
	require.NoError(t, err)
	require.Equal(t, 204, status)

	r, err = NewRunner(Config{Store: nopStore{}})
	require.NoError(t, err)
	_, err = r.post(context.Background(), voucher.DeliveryJob{URL: "https" + srv.URL[4:], Event: voucher.Event{ID: 1}})
	require.ErrorIs(t, err, errRefused)
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	r, err := NewRunner(Config{Store: nopStore{}, BackoffBase: time.Second, BackoffMax: 10 * time.Second,
		RandomTime: func(d time.Duration) time.Duration { return d }})
	require.NoError(t, err)
	require.Equal(t, time.Second, r.backoff(1))
	require.Equal(t, 2*time.Second, r.backoff(2))
	require.Equal(t, 8*time.Second, r.backoff(4))
	require.Equal(t, 10*time.Second, r.backoff(30))
	r.cfg.RandomTime = func(time.Duration) time.Duration { return 0 }
	require.Equal(t, 5*time.Second, r.backoff(30), "jitter keeps at least half")
}

// TestSendGivesUpAfterRetryFor: a failing delivery is retried until the
// next attempt would fall past RetryFor from its creation, then failed.
func TestSendGivesUpAfterRetryFor(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	defer srv.Close()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	r, err := NewRunner(Config{Store: nopStore{}, AllowPrivate: true, RetryFor: time.Hour, BackoffBase: time.Minute,
		Clock: func() time.Time { return now }, RandomTime: func(d time.Duration) time.Duration { return d }})
	require.NoError(t, err)
	job := voucher.DeliveryJob{URL: srv.URL, Event: voucher.Event{ID: 3}, Attempt: 1, CreatedAt: now}
	res := r.send(context.Background(), job)
	require.Equal(t, voucher.DeliveryPending, res.Status)
	require.Equal(t, now.Add(time.Minute), res.NextAttemptAt)
	require.Equal(t, 500, res.HTTPStatus)
	job.CreatedAt = now.Add(-59*time.Minute - time.Second)
	res = r.send(context.Background(), job)
	require.Equal(t, voucher.DeliveryFailed, res.Status)
}

// nopStore is a Store with nothing to do.
type nopStore struct{ Store }

func (nopStore) SequenceEvents(context.Context, int) (int, error) { return 0, nil }

// A description is refused before anything is stored when it is too long or
// holds a control character (NUL, which PostgreSQL cannot store, among them).
func TestCheckDescription(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		description string
		ok          bool
	}{
		{"", true},
		{"CRM sync – Zürich", true},
		{strings.Repeat("é", maxDescription), true},
		{strings.Repeat("é", maxDescription+1), false},
		{"null\x00byte", false},
		{"tab\there", false},
		{"line\nbreak", false},
		{"c1 \u0085 control", false},
	} {
		err := checkDescription(tc.description)
		if tc.ok {
			require.NoError(t, err, "%q", tc.description)
			continue
		}
		require.True(t, voucher.IsCode(err, voucher.CodeInvalidRequest), "%q: %v", tc.description, err)
	}
}
