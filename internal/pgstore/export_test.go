package pgstore

import (
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// CombinerWaiting returns the number of reservations of code queued for the
// next batch (0 when combining is off).
func CombinerWaiting(s *Store, code string) int {
	if s.comb == nil {
		return 0
	}
	return s.comb.waiting(code)
}

// SetBeforeWrite makes the combiner call f with the orderIds of each batch
// just before writing it; f may block to hold the write. Call it before the
// store's first reservation.
func SetBeforeWrite(s *Store, f func(code string, orderIDs []string)) {
	s.comb.beforeWrite = func(code string, batch []*pending) {
		ids := make([]string, len(batch))
		for i, p := range batch {
			ids[i] = p.req.OrderID
		}
		f(code, ids)
	}
}

// Rejection is the adapter's reading of a rejection a stored function
// answered: code, reason, facts and retry milliseconds.
func Rejection(code, reason, facts string, retryMS int64) *voucher.Error {
	return rejection(code, reason, facts, retryMS)
}

// VoucherPageQuery exposes the statement of a voucher page, for plans.
func VoucherPageQuery(f voucher.VoucherFilter, now time.Time) (string, []any, error) {
	return voucherPageQuery(f, now)
}

// RedemptionPageQuery exposes the statement of a redemption page, for plans.
func RedemptionPageQuery(f voucher.RedemptionFilter) (string, []any, error) {
	return redemptionPageQuery(f)
}
