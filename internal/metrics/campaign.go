package metrics

import (
	"context"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

var _ voucher.CampaignStore = (*Store)(nil)

// campaigns returns the wrapped store's campaign side.
func (s *Store) campaigns() (voucher.CampaignStore, error) {
	c, ok := s.Store.(voucher.CampaignStore)
	if !ok {
		return nil, voucher.Errorf(voucher.CodeInternal, "the store does not support campaigns")
	}
	return c, nil
}

// CreateCampaign implements voucher.CampaignStore.
func (s *Store) CreateCampaign(ctx context.Context, c voucher.Campaign, n int, gen voucher.CodeGenerator) (voucher.Campaign, error) {
	cs, err := s.campaigns()
	if err != nil {
		return voucher.Campaign{}, err
	}
	return cs.CreateCampaign(ctx, c, n, gen)
}

// AddCampaignCodes implements voucher.CampaignStore.
func (s *Store) AddCampaignCodes(ctx context.Context, id string, n int, gen voucher.CodeGenerator) (voucher.Campaign, error) {
	cs, err := s.campaigns()
	if err != nil {
		return voucher.Campaign{}, err
	}
	return cs.AddCampaignCodes(ctx, id, n, gen)
}

// Campaign implements voucher.CampaignStore.
func (s *Store) Campaign(ctx context.Context, id string) (voucher.Campaign, error) {
	cs, err := s.campaigns()
	if err != nil {
		return voucher.Campaign{}, err
	}
	return cs.Campaign(ctx, id)
}

// CampaignCodes implements voucher.CampaignStore.
func (s *Store) CampaignCodes(ctx context.Context, id string, p voucher.PageRequest) (voucher.CampaignCodePage, error) {
	cs, err := s.campaigns()
	if err != nil {
		return voucher.CampaignCodePage{}, err
	}
	return cs.CampaignCodes(ctx, id, p)
}

// EachCampaignCode implements voucher.CampaignStore.
func (s *Store) EachCampaignCode(ctx context.Context, id string, fn func(voucher.CampaignCode) error) error {
	cs, err := s.campaigns()
	if err != nil {
		return err
	}
	return cs.EachCampaignCode(ctx, id, fn)
}

// CodeCampaign implements voucher.CampaignStore; it is on the request path
// of every campaign reservation, so it is timed.
func (s *Store) CodeCampaign(ctx context.Context, code string) (string, error) {
	cs, err := s.campaigns()
	if err != nil {
		return "", err
	}
	start := time.Now()
	id, err := cs.CodeCampaign(ctx, code)
	s.observe("code_campaign", start, err)
	return id, err
}

// ResolveCode implements voucher.CodeResolver for a wrapped store that is
// one (pgstore.Store is; any other answers CodeInternal); it is on the
// request path of every code absent from the definition cache, so it is
// timed.
func (s *Store) ResolveCode(ctx context.Context, code, orderID string) (voucher.Resolution, error) {
	r, ok := s.Store.(voucher.CodeResolver)
	if !ok {
		return voucher.Resolution{}, voucher.Errorf(voucher.CodeInternal, "the store does not resolve codes")
	}
	start := time.Now()
	res, err := r.ResolveCode(ctx, code, orderID)
	s.observe("resolve_code", start, err)
	return res, err
}
