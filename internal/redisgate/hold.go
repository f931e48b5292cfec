package redisgate

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Hold states as the first field of an encoded hold.
const (
	stateHeld     = 'H' // holds a use, durable (or sync mode)
	statePending  = 'P' // holds a use, event not acknowledged yet (Kafka mode)
	stateReleased = 'R' // gave its use back; marks the orderId as used up
	// stateConfirmed: holds a use whose order a Kafka-mode confirmation
	// is making (or made) final; it is no longer a hold a replacement may
	// take over (Gate.Confirm).
	stateConfirmed = 'C'
)

// errBadHold is returned by decodeHold for a value this package did not write.
var errBadHold = errors.New("redisgate: malformed hold")

// encodeHold renders a hold as the value of the orders hash:
//
//	STATE|customerId|orderAmount|discountAmount|reservedAtMs|expiresAtMs[|owner[|code[|replaces]]]
//
// A compact, fixed field order keeps each hold to a few dozen bytes (a sale
// of a million uses stays small) and lets the scripts read the state and the
// customer with one pattern match. A zero time is written as 0. The owner,
// the instance that took the use and writes it to the store, is left out
// when unknown (holds loaded or adopted from the store), and empty when a
// code follows. The code is the campaign code a hold of a campaign's budget
// was taken with (h.Code); a voucher's hold has none, so its value is what
// it was before campaigns. replaces is the orderId a replacement's hold took
// the use of (h.Replaces), so that whoever writes the hold to the store
// writes the replacement, not a second use; the owner and code are then
// written, empty when absent. A customerId never holds '|'
// (voucher.ValidCustomerID), nor does a code (voucher.ValidCode) or an
// orderId (voucher.ValidOrderID); an integer id is written as its decimal
// digits, as releases with integer ids wrote it.
func encodeHold(state byte, h voucher.Hold) string {
	b := make([]byte, 0, 64)
	b = append(b, state, '|')
	b = append(b, h.CustomerID...)
	b = append(b, '|')
	b = strconv.AppendInt(b, h.OrderAmount, 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, h.DiscountAmount, 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, unixMilli(h.ReservedAt), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, unixMilli(h.ExpiresAt), 10)
	if h.Owner != "" || h.Code != "" || h.Replaces != "" {
		b = append(b, '|')
		b = append(b, h.Owner...)
	}
	if h.Code != "" || h.Replaces != "" {
		b = append(b, '|')
		b = append(b, h.Code...)
	}
	if h.Replaces != "" {
		b = append(b, '|')
		b = append(b, h.Replaces...)
	}
	return string(b)
}

// decodeHold parses a value written by encodeHold. orderID is not part of the
// value (it is the hash field) and is copied into the result.
func decodeHold(orderID, s string) (voucher.Hold, error) {
	parts := strings.Split(s, "|")
	if len(parts) < 6 || len(parts) > 9 || len(parts[0]) != 1 {
		return voucher.Hold{}, errBadHold
	}
	if !voucher.ValidCustomerID(parts[1]) {
		return voucher.Hold{}, errBadHold
	}
	var nums [4]int64
	for i, p := range parts[2:6] {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return voucher.Hold{}, errBadHold
		}
		nums[i] = n
	}
	h := voucher.Hold{
		OrderID:        orderID,
		CustomerID:     parts[1],
		OrderAmount:    nums[0],
		DiscountAmount: nums[1],
		ReservedAt:     fromUnixMilli(nums[2]),
		ExpiresAt:      fromUnixMilli(nums[3]),
	}
	switch {
	case len(parts) == 7 && !validOwner(parts[6]):
		return voucher.Hold{}, errBadHold
	case len(parts) == 8 && (parts[6] != "" && !validOwner(parts[6]) || !voucher.ValidCode(parts[7])):
		return voucher.Hold{}, errBadHold
	case len(parts) == 9 && (parts[6] != "" && !validOwner(parts[6]) ||
		parts[7] != "" && !voucher.ValidCode(parts[7]) || !voucher.ValidOrderID(parts[8])):
		return voucher.Hold{}, errBadHold
	}
	if len(parts) >= 7 {
		h.Owner = parts[6]
	}
	if len(parts) >= 8 {
		h.Code = parts[7]
	}
	if len(parts) == 9 {
		h.Replaces = parts[8]
	}
	switch parts[0][0] {
	case stateHeld:
	case stateConfirmed:
		h.Confirmed = true
	case statePending:
		h.Pending = true
	case stateReleased:
		h.Released = true
	default:
		return voucher.Hold{}, errBadHold
	}
	return h, nil
}

// heldState is the state of a hold that holds a use durably: confirmed or
// held.
func heldState(h voucher.Hold) byte {
	if h.Confirmed {
		return stateConfirmed
	}
	return stateHeld
}

// unixMilli is t in unix milliseconds, 0 for the zero time.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromUnixMilli is the inverse of unixMilli, in UTC.
func fromUnixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// validOwner reports whether s can be a hold's owner: an instance id of
// 1-64 letters, digits, '-' and '_' (voucher.ServiceConfig.Instance).
func validOwner(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
