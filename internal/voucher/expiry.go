package voucher

import (
	"context"
)

// ExpireDue releases up to limit reservations past their expiry, in the store
// and then in the gate, and returns how many it released.
func (s *Service) ExpireDue(ctx context.Context, limit int) (int, error) {
	released, err := s.store.ExpireDue(ctx, s.cfg.Clock(), limit)
	if err != nil {
		return 0, err
	}
	for _, r := range released {
		s.releaseInGate(ctx, r.VoucherCode, r.OrderID)
	}
	if len(released) > 0 {
		s.obs.Expired(len(released))
	}
	return len(released), nil
}
