package kafkalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// EventTypeReserved is the "type" of a VoucherReserved event.
const EventTypeReserved = "VoucherReserved"

// wireEvent is the JSON form of voucher.ReservedEvent on the topic. The
// version and type travel in the value so that a record read on its own (a
// dead letter, a tool) says what it is.
type wireEvent struct {
	Version     int          `json:"version"`
	Type        string       `json:"type"`
	Code        string       `json:"code"`
	CustomerID  wireCustomer `json:"customerId"`
	OrderID     string       `json:"orderId"`
	OrderAmount int64        `json:"orderAmount"`
	// DiscountAmount is the discount computed for this order when it was
	// reserved (a pointer: missing is an error, 0 is a percentage that
	// rounded down to nothing).
	DiscountAmount *int64    `json:"discountAmount"`
	ReservedAt     time.Time `json:"reservedAt"`
	ExpiresAt      time.Time `json:"expiresAt"`
	// ReplacesOrderID is present in versions 2 to 5 (always in 2; in 5,
	// a stack that replaces an order: a build whose version 5 did not
	// know it refuses the event, dead-lettering it rather than writing the
	// stack beside the order it replaces).
	ReplacesOrderID string `json:"replacesOrderId,omitempty"`
	// CampaignCode is present in version 3 only: the campaign code a use of
	// a flash campaign was taken with (Code is the campaign id).
	CampaignCode string `json:"campaignCode,omitempty"`
	// HeldSince is present on a replacement whose chain began before it:
	// when the first hold began. Consumers that do not know it ignore it.
	HeldSince *time.Time `json:"heldSince,omitempty"`
	// Window is present in versions 4 and 5 only: the start of the
	// occurrence of the voucher's windows the use was taken in (in version
	// 5, the first member's).
	Window *time.Time `json:"window,omitempty"`
	// Members and StackCustomerID are present in version 5 only, the one
	// event of a stack: every member's use, the first being the event's
	// own fields, and the customerId the stack was asked with.
	Members         []wireMember `json:"members,omitempty"`
	StackCustomerID wireCustomer `json:"stackCustomerId,omitempty"`
}

// wireMember is one voucher.StackEventMember on the topic.
type wireMember struct {
	Code           string       `json:"code"`
	CustomerID     wireCustomer `json:"customerId"`
	OrderID        string       `json:"orderId"`
	OrderAmount    int64        `json:"orderAmount"`
	DiscountAmount *int64       `json:"discountAmount"`
	Window         *time.Time   `json:"window,omitempty"`
}

// wireCustomer is a customerId on the topic: a JSON number for an integer id
// (what consumers of releases with integer ids read, so that they keep
// reading the events of this one during a rolling upgrade), a JSON string
// otherwise; both are read, so events of those releases decode too.
type wireCustomer string

// MarshalJSON implements json.Marshaler.
func (c wireCustomer) MarshalJSON() ([]byte, error) {
	if !voucher.ValidCustomerID(string(c)) {
		return nil, fmt.Errorf("invalid customerId %q", string(c))
	}
	return voucher.AppendCustomerIDJSON(nil, string(c)), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *wireCustomer) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	s, err := voucher.ParseCustomerIDJSON(b)
	if err != nil {
		return fmt.Errorf("customerId %s: %w", b, err)
	}
	*c = wireCustomer(s)
	return nil
}

// encodeEvent writes e in the wire format: version EventVersion, or
// EventVersionReplace for a replacement, or EventVersionCampaign for a use
// of a flash campaign (replacing or not), or EventVersionWindow for a use
// in a window's occurrence, or EventVersionStack for a stack: the lowest
// version that says everything e says. It runs once per Kafka-mode take,
// so it appends the fields itself (appendEvent); an event whose fields
// that cannot write exactly as encoding/json would (a stack's, among
// others) goes through marshalEvent.
func encodeEvent(e voucher.ReservedEvent) ([]byte, error) {
	if b, ok := appendEvent(make([]byte, 0, 320), e); ok {
		return b, nil
	}
	return marshalEvent(e)
}

// eventVersion is the version encodeEvent writes for e.
func eventVersion(e voucher.ReservedEvent) int {
	switch {
	case len(e.Members) > 0:
		return voucher.EventVersionStack
	case !e.Window.IsZero():
		return voucher.EventVersionWindow
	case e.CampaignCode != "":
		return voucher.EventVersionCampaign
	case e.ReplacesOrderID != "":
		return voucher.EventVersionReplace
	}
	return voucher.EventVersion
}

// appendEvent appends e's JSON, byte for byte what marshalEvent writes
// (wireEvent's field order, its omitempty fields, times in RFC 3339 with
// nanoseconds in UTC), and reports false, having appended nothing useful,
// when a field needs what only encoding/json does: a string with a
// character it escapes, an invalid customerId (its error), a time outside
// years 0-9999, a stack's members.
func appendEvent(b []byte, e voucher.ReservedEvent) ([]byte, bool) {
	if !plainJSON(e.Code) || !plainJSON(e.OrderID) || !plainJSON(e.ReplacesOrderID) || !plainJSON(e.CampaignCode) ||
		!voucher.ValidCustomerID(e.CustomerID) || len(e.Members) > 0 {
		return b, false
	}
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(eventVersion(e)), 10)
	b = append(b, `,"type":"`+EventTypeReserved+`","code":"`...)
	b = append(b, e.Code...)
	b = append(b, `","customerId":`...)
	b = voucher.AppendCustomerIDJSON(b, e.CustomerID)
	b = append(b, `,"orderId":"`...)
	b = append(b, e.OrderID...)
	b = append(b, `","orderAmount":`...)
	b = strconv.AppendInt(b, e.OrderAmount, 10)
	b = append(b, `,"discountAmount":`...)
	b = strconv.AppendInt(b, e.DiscountAmount, 10)
	ok := true
	b = append(b, `,"reservedAt":`...)
	b, ok = appendTime(b, e.ReservedAt, ok)
	b = append(b, `,"expiresAt":`...)
	b, ok = appendTime(b, e.ExpiresAt, ok)
	if e.ReplacesOrderID != "" {
		b = append(b, `,"replacesOrderId":"`...)
		b = append(b, e.ReplacesOrderID...)
		b = append(b, '"')
	}
	if e.CampaignCode != "" {
		b = append(b, `,"campaignCode":"`...)
		b = append(b, e.CampaignCode...)
		b = append(b, '"')
	}
	if !e.HeldSince.IsZero() {
		b = append(b, `,"heldSince":`...)
		b, ok = appendTime(b, e.HeldSince, ok)
	}
	if !e.Window.IsZero() {
		b = append(b, `,"window":`...)
		b, ok = appendTime(b, e.Window, ok)
	}
	return append(b, '}'), ok
}

// appendTime appends t in UTC as time.Time's MarshalJSON writes it; ok
// turns false for a year it refuses.
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}

// plainJSON reports whether s is written between quotes unchanged by
// encoding/json: printable ASCII without '"', '\' and the characters it
// escapes for HTML ('<', '>', '&').
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// marshalEvent is encodeEvent with encoding/json.
func marshalEvent(e voucher.ReservedEvent) ([]byte, error) {
	var heldSince *time.Time
	if !e.HeldSince.IsZero() {
		t := e.HeldSince.UTC()
		heldSince = &t
	}
	var members []wireMember
	for _, m := range e.Members {
		members = append(members, wireMember{Code: m.Code, CustomerID: wireCustomer(m.CustomerID), OrderID: m.OrderID,
			OrderAmount: m.OrderAmount, DiscountAmount: &m.DiscountAmount, Window: wireTime(m.Window)})
	}
	return json.Marshal(wireEvent{
		Version:         eventVersion(e),
		ReplacesOrderID: e.ReplacesOrderID,
		CampaignCode:    e.CampaignCode,
		Type:            EventTypeReserved,
		Code:            e.Code,
		CustomerID:      wireCustomer(e.CustomerID),
		OrderID:         e.OrderID,
		OrderAmount:     e.OrderAmount,
		DiscountAmount:  &e.DiscountAmount,
		ReservedAt:      e.ReservedAt.UTC(),
		ExpiresAt:       e.ExpiresAt.UTC(),
		HeldSince:       heldSince,
		Window:          wireTime(e.Window),
		Members:         members,
		StackCustomerID: wireCustomer(e.StackCustomerID),
	})
}

// wireTime is t in UTC, nil when t is zero.
func wireTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// errUndecodable marks a record the consumer cannot turn into an event; it
// goes to the dead-letter topic.
var errUndecodable = errors.New("undecodable event")

// decodeEvent parses and checks one record value. Unknown fields are
// ignored (a newer producer may add some); a version this build does not
// know, a missing field or an out-of-range value is an error wrapping
// errUndecodable.
func decodeEvent(value []byte) (voucher.ReservedEvent, error) {
	var w wireEvent
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&w); err != nil {
		return voucher.ReservedEvent{}, fmt.Errorf("%w: %v", errUndecodable, err)
	}
	if dec.More() {
		return voucher.ReservedEvent{}, fmt.Errorf("%w: trailing data after the JSON object", errUndecodable)
	}
	if err := w.check(); err != nil {
		return voucher.ReservedEvent{}, fmt.Errorf("%w: %v", errUndecodable, err)
	}
	var heldSince time.Time
	if w.HeldSince != nil {
		heldSince = *w.HeldSince
	}
	var window time.Time
	if w.Window != nil {
		window = w.Window.UTC()
	}
	var members []voucher.StackEventMember
	for _, m := range w.Members {
		var mw time.Time
		if m.Window != nil {
			mw = m.Window.UTC()
		}
		members = append(members, voucher.StackEventMember{Code: m.Code, CustomerID: string(m.CustomerID), OrderID: m.OrderID,
			OrderAmount: m.OrderAmount, DiscountAmount: *m.DiscountAmount, Window: mw})
	}
	return voucher.ReservedEvent{
		Members:         members,
		StackCustomerID: string(w.StackCustomerID),
		HeldSince:       heldSince,
		Window:          window,
		Version:         w.Version,
		Code:            w.Code,
		CustomerID:      string(w.CustomerID),
		OrderID:         w.OrderID,
		OrderAmount:     w.OrderAmount,
		DiscountAmount:  *w.DiscountAmount,
		ReservedAt:      w.ReservedAt,
		ExpiresAt:       w.ExpiresAt,
		ReplacesOrderID: w.ReplacesOrderID,
		CampaignCode:    w.CampaignCode,
	}, nil
}

func (w wireEvent) check() error {
	switch {
	case w.Type != EventTypeReserved:
		return fmt.Errorf("type %q is not %s", w.Type, EventTypeReserved)
	case w.Version != voucher.EventVersion && w.Version != voucher.EventVersionReplace && w.Version != voucher.EventVersionCampaign &&
		w.Version != voucher.EventVersionWindow && w.Version != voucher.EventVersionStack:
		return fmt.Errorf("unsupported event version %d (this build reads %d, %d, %d, %d and %d)", w.Version,
			voucher.EventVersion, voucher.EventVersionReplace, voucher.EventVersionCampaign, voucher.EventVersionWindow,
			voucher.EventVersionStack)
	case (w.Version == voucher.EventVersionStack) != (len(w.Members) > 0):
		return fmt.Errorf("members come with version %d, and only with it", voucher.EventVersionStack)
	case w.Version == voucher.EventVersionStack && w.CampaignCode != "":
		return errors.New("a stack's event has no campaignCode")
	case w.Version == voucher.EventVersionWindow && w.Window == nil,
		w.Version != voucher.EventVersionWindow && w.Version != voucher.EventVersionStack && w.Window != nil:
		return fmt.Errorf("window comes with version %d (or %d), and only with it", voucher.EventVersionWindow,
			voucher.EventVersionStack)
	case w.Version == voucher.EventVersion && w.ReplacesOrderID != "",
		w.Version == voucher.EventVersionReplace && w.ReplacesOrderID == "":
		return fmt.Errorf("replacesOrderId comes with version %d (or %d, %d or %d), and only with it",
			voucher.EventVersionReplace, voucher.EventVersionCampaign, voucher.EventVersionWindow, voucher.EventVersionStack)
	case w.Version == voucher.EventVersionCampaign && w.CampaignCode == "",
		w.Version != voucher.EventVersionCampaign && w.Version != voucher.EventVersionWindow && w.CampaignCode != "":
		return fmt.Errorf("campaignCode comes with version %d (or %d), and only with it", voucher.EventVersionCampaign,
			voucher.EventVersionWindow)
	case w.CampaignCode != "" && (!voucher.ValidCode(w.CampaignCode) || w.CampaignCode == w.Code):
		return fmt.Errorf("invalid campaignCode %q", w.CampaignCode)
	case w.ReplacesOrderID != "" && (!voucher.ValidOrderID(w.ReplacesOrderID) || w.ReplacesOrderID == w.OrderID):
		return fmt.Errorf("invalid replacesOrderId %q", w.ReplacesOrderID)
	case !voucher.ValidCode(w.Code):
		return fmt.Errorf("invalid code %q", w.Code)
	case !voucher.ValidOrderID(w.OrderID):
		return fmt.Errorf("invalid orderId %q", w.OrderID)
	case w.CustomerID == "":
		return errors.New("customerId is missing")
	case w.OrderAmount < 0:
		return fmt.Errorf("orderAmount must be >= 0, got %d", w.OrderAmount)
	case w.DiscountAmount == nil:
		return errors.New("discountAmount is missing")
	case *w.DiscountAmount < 0 || *w.DiscountAmount > voucher.MaxAmount:
		return fmt.Errorf("discountAmount must be from 0 to %d, got %d", int64(voucher.MaxAmount), *w.DiscountAmount)
	case w.ReservedAt.IsZero():
		return errors.New("reservedAt is missing")
	case !w.ExpiresAt.After(w.ReservedAt):
		return errors.New("expiresAt must be after reservedAt")
	case w.HeldSince != nil && (w.ReplacesOrderID == "" || w.HeldSince.After(w.ReservedAt) || w.HeldSince.IsZero()):
		return errors.New("heldSince comes with replacesOrderId, and is not after reservedAt")
	}
	return w.checkMembers()
}

// checkMembers checks a stack's members: at most voucher.MaxStackCodes
// distinct codes, the first being the event's own fields, each under its
// position's member orderId (voucher.StackMemberOrderID).
func (w wireEvent) checkMembers() error {
	if len(w.Members) == 0 {
		return nil
	}
	if len(w.Members) > voucher.MaxStackCodes {
		return fmt.Errorf("a stack has at most %d members, got %d", voucher.MaxStackCodes, len(w.Members))
	}
	if w.StackCustomerID == "" {
		return errors.New("stackCustomerId is missing")
	}
	first := w.Members[0]
	if first.Code != w.Code || first.CustomerID != w.CustomerID || first.OrderID != w.OrderID || first.OrderAmount != w.OrderAmount ||
		first.DiscountAmount == nil || *first.DiscountAmount != *w.DiscountAmount || !sameWireTime(first.Window, w.Window) {
		return errors.New("the first member is not the event's own use")
	}
	seen := make(map[string]bool, len(w.Members))
	for i, m := range w.Members {
		switch {
		case !voucher.ValidCode(m.Code) || seen[m.Code]:
			return fmt.Errorf("member %d: invalid or repeated code %q", i+1, m.Code)
		case m.OrderID != voucher.StackMemberOrderID(w.OrderID, i+1):
			return fmt.Errorf("member %d: orderId %q is not the stack's member orderId", i+1, m.OrderID)
		case m.OrderID == w.ReplacesOrderID:
			return fmt.Errorf("member %d: replaces its own orderId", i+1)
		case m.CustomerID == "":
			return fmt.Errorf("member %d: customerId is missing", i+1)
		case m.OrderAmount < 0:
			return fmt.Errorf("member %d: orderAmount must be >= 0, got %d", i+1, m.OrderAmount)
		case m.DiscountAmount == nil || *m.DiscountAmount < 0 || *m.DiscountAmount > voucher.MaxAmount:
			return fmt.Errorf("member %d: discountAmount is missing or out of range", i+1)
		}
		seen[m.Code] = true
	}
	return nil
}

// sameWireTime tells whether two optional times are both absent or equal.
func sameWireTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
