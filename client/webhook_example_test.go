package client_test

import (
	"io"
	"net/http"
	"time"

	"github.com/voucherd/voucherd/client"
)

// A receiver of voucherd's webhooks checks the signature over the raw body
// before it trusts anything in it, and answers 2xx only once the event is
// handled: any other answer is retried. Deliveries are at least once, so it
// drops an event id it has handled already.
func ExampleVerifyWebhook() {
	const secret = "whsec_..." // from POST /webhooks
	seen := map[int64]bool{}   // a table with a unique key, in a real service
	handle := func(*client.Event) {}
	http.HandleFunc("POST /voucherd", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		e, err := client.VerifyWebhook(secret, r.Header.Get(client.HeaderSignature), body, time.Now(), 0)
		if err != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		if !seen[e.ID] {
			handle(e)
			seen[e.ID] = true
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
