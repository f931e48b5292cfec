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

// The fields of an encoded hold, the value of the orders hash, by position:
//
//	state|customerId|orderAmount|discountAmount|reservedAtMs|expiresAtMs[|owner[|code[|replaces[|heldSinceMs[|windowMs]]]]]
//
// The scripts read the same layout from scripts/lib/hold.lua, whose header
// shows this line; TestHoldLayoutMatchesLua checks that the block's field
// positions and readers agree with these constants and decodeHold. Fields
// after windowMs are a later release's, so that instances of two releases
// can share a gate during a rolling upgrade: decodeHold accepts and ignores
// them, and every script keeps them when it rewrites a hold
// (TestHoldKeepsALaterReleasesFields).
const (
	fieldState = iota
	fieldCustomer
	fieldOrderAmount
	fieldDiscount
	fieldReservedAt
	fieldExpiresAt
	fieldOwner // the first optional field
	fieldCode
	fieldReplaces
	fieldHeldSince
	fieldWindow // windowMs: the occurrence the hold was taken in (h.Window)
	holdFields  // the number of fields
)

// encodeHold renders a hold as the value of the orders hash, in the layout
// of the field constants. A compact, fixed field order keeps each hold to a
// few dozen bytes (a sale of a million uses stays small) and lets the
// scripts read the state and the customer with one pattern match. A zero
// time is written as 0. An optional field is written when it or a later one
// is set, empty when only a later one is. The owner, the instance that took
// the use and writes it to the store, is unknown for holds loaded or adopted
// from the store. The code is the campaign code a hold of a campaign's
// budget was taken with (h.Code); a voucher's hold has none, so its value is
// what it was before campaigns. replaces is the orderId a replacement's hold
// took the use of (h.Replaces), so that whoever writes the hold to the store
// writes the replacement, not a second use. heldSinceMs is when the first
// hold of a chain of replacements began (h.HeldSince), written for a
// replacement's hold only, so that a hold that replaces nothing keeps the
// layout releases before it read. A customerId never holds '|'
// (voucher.ValidCustomerID), nor does a code (voucher.ValidCode) or an
// orderId (voucher.ValidOrderID); an integer id is written as its decimal
// digits, as releases with integer ids wrote it.
func encodeHold(state byte, h voucher.Hold) string {
	n := holdFields
	for n > fieldOwner && optionalField(h, n-1) == "" {
		n--
	}
	// Built in a buffer on the stack: the string is the one allocation.
	var buf [128]byte
	b := buf[:0]
	for f := range n {
		if f > 0 {
			b = append(b, '|')
		}
		switch f {
		case fieldState:
			b = append(b, state)
		case fieldCustomer:
			b = append(b, h.CustomerID...)
		case fieldOrderAmount:
			b = strconv.AppendInt(b, h.OrderAmount, 10)
		case fieldDiscount:
			b = strconv.AppendInt(b, h.DiscountAmount, 10)
		case fieldReservedAt:
			b = strconv.AppendInt(b, unixMilli(h.ReservedAt), 10)
		case fieldExpiresAt:
			b = strconv.AppendInt(b, unixMilli(h.ExpiresAt), 10)
		default:
			b = append(b, optionalField(h, f)...)
		}
	}
	return string(b)
}

// optionalField returns the value of the optional field f of h.
func optionalField(h voucher.Hold, f int) string {
	switch f {
	case fieldOwner:
		return h.Owner
	case fieldCode:
		return h.Code
	case fieldReplaces:
		return h.Replaces
	case fieldHeldSince:
		if h.HeldSince.IsZero() {
			return ""
		}
		return strconv.FormatInt(unixMilli(h.HeldSince), 10)
	case fieldWindow:
		return windowArg(h.Window)
	}
	panic("redisgate: not an optional hold field")
}

// validOptionalField reports whether s is a valid value of the optional
// field f; "" is not.
func validOptionalField(f int, s string) bool {
	switch f {
	case fieldOwner:
		return validOwner(s)
	case fieldCode:
		return voucher.ValidCode(s)
	case fieldReplaces:
		return voucher.ValidOrderID(s)
	case fieldHeldSince:
		ms, err := strconv.ParseInt(s, 10, 64)
		return err == nil && ms > 0
	case fieldWindow:
		ms, err := strconv.ParseInt(s, 10, 64)
		return err == nil && ms != 0
	}
	return false
}

// decodeHold parses a value written by encodeHold. orderID is not part of the
// value (it is the hash field) and is copied into the result.
func decodeHold(orderID, s string) (voucher.Hold, error) {
	parts := strings.Split(s, "|")
	if len(parts) < fieldOwner || len(parts[fieldState]) != 1 {
		return voucher.Hold{}, errBadHold
	}
	if !voucher.ValidCustomerID(parts[fieldCustomer]) {
		return voucher.Hold{}, errBadHold
	}
	var nums [fieldOwner]int64
	for f := fieldOrderAmount; f < fieldOwner; f++ {
		n, err := strconv.ParseInt(parts[f], 10, 64)
		if err != nil {
			return voucher.Hold{}, errBadHold
		}
		nums[f] = n
	}
	h := voucher.Hold{
		OrderID:        orderID,
		CustomerID:     parts[fieldCustomer],
		OrderAmount:    nums[fieldOrderAmount],
		DiscountAmount: nums[fieldDiscount],
		ReservedAt:     fromUnixMilli(nums[fieldReservedAt]),
		ExpiresAt:      fromUnixMilli(nums[fieldExpiresAt]),
	}
	// An optional field may be empty when a later one follows; the last one
	// written is set. A field past the ones this release knows is a later
	// release's (see the layout above): read by none of this release, kept
	// as it is by the scripts, whatever it holds.
	for f := fieldOwner; f < len(parts); f++ {
		if parts[f] == "" && f < len(parts)-1 {
			continue
		}
		if f >= holdFields {
			if parts[f] == "" {
				return voucher.Hold{}, errBadHold
			}
			continue
		}
		if !validOptionalField(f, parts[f]) {
			return voucher.Hold{}, errBadHold
		}
		switch f {
		case fieldOwner:
			h.Owner = parts[f]
		case fieldCode:
			h.Code = parts[f]
		case fieldReplaces:
			h.Replaces = parts[f]
		case fieldHeldSince:
			ms, _ := strconv.ParseInt(parts[f], 10, 64) // validOptionalField parsed it
			h.HeldSince = fromUnixMilli(ms)
		case fieldWindow:
			ms, _ := strconv.ParseInt(parts[f], 10, 64) // validOptionalField parsed it
			h.Window = time.UnixMilli(ms).UTC()
		}
	}
	switch parts[fieldState][0] {
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
