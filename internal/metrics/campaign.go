package metrics

import (
	"context"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// CodeCampaign implements voucher.Store; it is on the request path of
// every campaign reservation, so it is timed.
func (s *Store) CodeCampaign(ctx context.Context, code string) (string, error) {
	start := time.Now()
	id, err := s.Store.CodeCampaign(ctx, code)
	s.observe("code_campaign", start, err)
	return id, err
}

// ResolveCode implements voucher.Store; it is on the request path of every
// code absent from the definition cache, so it is timed.
func (s *Store) ResolveCode(ctx context.Context, code, orderID string) (voucher.Resolution, error) {
	start := time.Now()
	res, err := s.Store.ResolveCode(ctx, code, orderID)
	s.observe("resolve_code", start, err)
	return res, err
}
