package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// client sends single attempts to the instances and records each one in
// the history. It never retries by itself: the workload does, so that
// every attempt is in the history.
type client struct {
	id   int // the workload goroutine
	hc   *http.Client
	hist *History
	// addrs returns the instances' addresses; next is this client's
	// round-robin position.
	addrs func() []string
	next  int
}

func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 500 * time.Millisecond}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
}

// attempt sends one attempt of op to the next instance, waits at most
// timeout, records it, and returns its outcome. A failure to reach the
// instance moves the round robin on.
func (c *client) attempt(op Op, timeout time.Duration) Outcome {
	addrs := c.addrs()
	inst := c.next % len(addrs)
	c.next++
	op.Instance = inst
	base := "http://" + addrs[inst] + "/vouchers/" + op.Voucher + "/reservations"
	codes := StackCodes(op.Voucher)
	if codes != nil {
		base = "http://" + addrs[inst] + "/reservations"
	}
	var method, url string
	var body []byte
	switch op.Kind {
	case Reserve:
		method, url = http.MethodPost, base
		req := map[string]any{"customerId": op.Customer, "orderId": op.OrderID, "orderAmount": 5000}
		if codes != nil {
			req["codes"] = codes
		}
		if op.Replaces != "" {
			req["replacesOrderId"] = op.Replaces
		}
		body, _ = json.Marshal(req)
	case Release:
		method, url = http.MethodDelete, base+"/"+op.OrderID
	case Confirm:
		method, url = http.MethodPost, base+"/"+op.OrderID+"/confirm"
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	id := c.hist.Start(op)
	resp, err := c.hc.Do(req)
	if err != nil {
		out := Unknown
		if notSent(err) {
			out = NotSent
		}
		c.hist.Finish(id, out, 0, false, shortErr(err))
		return out
	}
	data, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		// The status line came, the body did not: the server answered, but
		// trust nothing that is not whole.
		c.hist.Finish(id, Unknown, resp.StatusCode, false, "reading body: "+shortErr(rerr))
		return Unknown
	}
	out, detail := classify(op.Kind, resp.StatusCode, data)
	replayed := resp.Header.Get("Idempotent-Replayed") == "true"
	c.hist.Finish(id, out, resp.StatusCode, replayed, detail)
	return out
}

// classify turns a response into an outcome.
func classify(kind Kind, status int, body []byte) (Outcome, string) {
	var e struct {
		Error          string `json:"error"`
		Message        string `json:"message"`
		OutcomeUnknown bool   `json:"outcomeUnknown"`
	}
	_ = json.Unmarshal(body, &e)
	switch {
	case status == http.StatusCreated && kind == Reserve, status == http.StatusOK && kind != Reserve:
		return OK, ""
	case status == http.StatusServiceUnavailable && e.OutcomeUnknown:
		// Kafka mode after a produce timeout: the service itself says the
		// event may still land, so this 503 is not "nothing was taken".
		return Unknown, "ambiguous 503: " + e.Message
	case status == http.StatusServiceUnavailable:
		return Unavailable, e.Message
	case status >= 500:
		// An internal error says nothing about what was done.
		return Unknown, fmt.Sprintf("status %d: %s", status, strings.TrimSpace(string(body)))
	case e.Error == "RESERVATION_NOT_FOUND":
		return NotFound, ""
	case e.Error == "HELD_OUT", e.Error == "BUDGET_EXCEEDED":
		// Nothing free, some uses only held: for the model it is the same
		// refusal as OUT_OF_STOCK. So is a budget scenario's spent budget:
		// its fixed discounts make the budget a number of uses.
		return OutOfStock, ""
	case e.Error != "":
		return Outcome(e.Error), ""
	}
	return Outcome(fmt.Sprintf("HTTP_%d", status)), strings.TrimSpace(string(body))
}

// notSent reports whether err proves the request never reached a server:
// the connection was refused or could not be made.
func notSent(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "http://") {
		s = s[i+2:]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
