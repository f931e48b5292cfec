package pgstore

import (
	"strconv"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// rejection turns a rule's answer from a stored function (code, NOT_ELIGIBLE
// reason, facts, and for HELD_OUT the milliseconds to wait) into its
// *voucher.Error, worded by voucher.Reject. Facts that do not parse (text
// worded by the functions of an older version, met while an upgrade runs)
// are kept as the message.
func rejection(code, reason, facts string, retryMS int64) *voucher.Error {
	f, ok := parseFacts(facts)
	if !ok {
		e := &voucher.Error{Code: voucher.ErrorCode(code), Reason: voucher.Reason(reason), Message: facts,
			Limit: voucher.LimitOf(voucher.ErrorCode(code), voucher.Reason(reason))}
		if e.Code == voucher.CodeHeldOut {
			e.RetryAfter = max(time.Duration(retryMS)*time.Millisecond, time.Second)
		}
		return e
	}
	if retryMS > 0 {
		f.RetryAfter = time.Duration(retryMS) * time.Millisecond
	}
	return voucher.Reject(voucher.ErrorCode(code), voucher.Reason(reason), f)
}

// parseFacts reads the facts of a rejection, space-separated key=value pairs
// (functions/voucherd_reject.sql lists the keys). It reports false for
// anything else, including an unknown key.
func parseFacts(s string) (voucher.Facts, bool) {
	var f voucher.Facts
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return f, false
	}
	for _, kv := range fields {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return f, false
		}
		var err error
		switch k {
		case "voucher":
			f.Voucher = v
		case "order":
			f.OrderID = v
		case "uses":
			f.UsesVoucher = v
		case "customer":
			if !voucher.ValidCustomerID(v) {
				return f, false
			}
			f.CustomerID = v
		case "limit":
			var n int64
			n, err = strconv.ParseInt(v, 10, 32)
			f.PerUserLimit = int32(n)
		case "starts":
			f.StartsAt, err = time.Parse(time.RFC3339, v)
		case "ends":
			f.EndsAt, err = time.Parse(time.RFC3339, v)
		case "amount":
			f.OrderAmount, err = strconv.ParseInt(v, 10, 64)
		case "min":
			f.MinOrderAmount, err = strconv.ParseInt(v, 10, 64)
		case "budget":
			f.BudgetRemaining, err = strconv.ParseInt(v, 10, 64)
		case "retry":
			var ms int64
			ms, err = strconv.ParseInt(v, 10, 64)
			f.RetryAfter = time.Duration(ms) * time.Millisecond
		case "vcurrency":
			f.VoucherCurrency = v
		case "currency":
			f.Currency = v
		case "window":
			f.Window = v == "1"
		default:
			return f, false
		}
		if err != nil {
			return f, false
		}
	}
	return f, true
}
