package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is the kind of a client operation.
type Kind uint8

// The operations the workload issues.
const (
	Reserve Kind = iota + 1
	Release
	Confirm
)

func (k Kind) String() string {
	switch k {
	case Reserve:
		return "reserve"
	case Release:
		return "release"
	case Confirm:
		return "confirm"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Outcome is what one attempt of an operation returned, as the model sees
// it: "ok" for a 2xx, the error code of a definite refusal, or one of the
// outcomes below.
type Outcome string

// Outcomes of an attempt.
const (
	// OK is a 201 reservation or a 200 confirm/release.
	OK Outcome = "ok"
	// Unknown is an attempt whose effect the client cannot know: a timeout,
	// a connection cut after the request was sent, a 5xx other than 503. It
	// may have taken effect at any moment after it was sent, or never.
	Unknown Outcome = "unknown"
	// Unavailable is a 503: the contract says nothing was taken.
	Unavailable Outcome = "unavailable"
	// NotSent is an attempt that never reached a server (connection
	// refused): it certainly did nothing and is left out of the model.
	NotSent Outcome = "notsent"

	OutOfStock          Outcome = "OUT_OF_STOCK"
	AlreadyUsed         Outcome = "ALREADY_USED"
	OrderConflict       Outcome = "ORDER_CONFLICT"
	OrderReleased       Outcome = "ORDER_RELEASED"
	NotFound            Outcome = "NOT_FOUND"
	ReservationReleased Outcome = "RESERVATION_RELEASED"
	// ReplacedOrderNotHeld refuses a reservation whose Replaces is not
	// the customer's RESERVED hold on the voucher; nothing changes.
	ReplacedOrderNotHeld Outcome = "REPLACED_ORDER_NOT_HELD"
)

// Definite reports whether the outcome tells what the attempt did.
func (o Outcome) Definite() bool { return o != Unknown && o != Unavailable && o != NotSent }

// Op is one attempt of an operation, as the client saw it. A retry is a
// new Op with the same OrderID.
type Op struct {
	ID int
	// Seq names the logical operation: the attempts of one reservation,
	// release or confirm (a first try and its retries with the same
	// orderId) share it. 0 means the attempt stands alone.
	Seq      int
	Client   int // the workload goroutine that issued it
	Instance int // the voucherd instance it was sent to
	Kind     Kind
	// Voucher is the code the attempt names: the voucher's, or for a
	// campaign the campaign code the order was made with.
	Voucher  string
	Customer string
	OrderID  string
	// Replaces is, for a reservation, the orderId of the customer's hold
	// it replaces (replacesOrderId); "" for a plain reservation.
	Replaces string
	// Call and Return are nanoseconds since the history began; Return is
	// -1 while the attempt runs. An Unknown attempt's Return is when the
	// client gave up; the model treats it as open-ended.
	Call, Return int64
	Outcome      Outcome
	Status       int  // HTTP status, 0 without a response
	Replayed     bool // the Idempotent-Replayed header of a 201
	Err          string
}

func (op Op) String() string {
	ret := "…"
	if op.Return >= 0 {
		ret = fmt.Sprintf("%.3fs", float64(op.Return)/1e9)
	}
	order := op.OrderID
	if op.Replaces != "" {
		order += " replacing " + op.Replaces
	}
	s := fmt.Sprintf("#%d c%d i%d %.3fs→%s %s(%s, cust %s, %s) = %s", op.ID, op.Client, op.Instance,
		float64(op.Call)/1e9, ret, op.Kind, op.Voucher, op.Customer, order, op.Outcome)
	if op.Replayed {
		s += " (replayed)"
	}
	if op.Err != "" {
		s += " [" + op.Err + "]"
	}
	return s
}

// History records operations from many goroutines.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewHistory starts an empty history; times are measured from now.
func NewHistory() *History { return &History{start: time.Now()} }

// Since returns the history clock: nanoseconds since the history began.
func (h *History) Since() int64 { return int64(time.Since(h.start)) }

// Start records the invocation of op and returns its id for Finish.
func (h *History) Start(op Op) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.ops)
	op.Call = h.Since()
	op.Return = -1
	h.ops = append(h.ops, op)
	return op.ID
}

// Finish records the completion of the attempt id.
func (h *History) Finish(id int, outcome Outcome, status int, replayed bool, errText string) {
	now := h.Since()
	h.mu.Lock()
	defer h.mu.Unlock()
	op := &h.ops[id]
	op.Return = now
	op.Outcome = outcome
	op.Status = status
	op.Replayed = replayed
	op.Err = errText
}

// Ops returns a copy of the recorded operations, in invocation order.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// Add appends a complete op, for tests that build histories by hand.
func (h *History) Add(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.ops)
	h.ops = append(h.ops, op)
}

// Summary counts outcomes per kind, for logs and the report.
func Summary(ops []Op) string {
	counts := map[string]int{}
	for _, op := range ops {
		counts[op.Kind.String()+" "+string(op.Outcome)]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, counts[k])
	}
	return strings.TrimSpace(b.String())
}

// OrderOps returns the attempts on orderID (and the replacements naming
// it), in invocation order, for failure messages.
func OrderOps(ops []Op, orderID string) []Op {
	var out []Op
	for _, op := range ops {
		if op.OrderID == orderID || op.Replaces == orderID {
			out = append(out, op)
		}
	}
	return out
}

// Recorded is a run saved for offline checking: the voucher (or
// campaign), the final rows and every attempt.
type Recorded struct {
	Mode string
	Spec VoucherSpec
	DB   DBState
	Ops  []Op
}

// Save writes r as JSON to path.
func (r Recorded) Save(path string) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// LoadRecorded reads a run saved by Save.
func LoadRecorded(path string) (Recorded, error) {
	var r Recorded
	data, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	err = json.Unmarshal(data, &r)
	return r, err
}
