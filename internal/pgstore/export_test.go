package pgstore

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
