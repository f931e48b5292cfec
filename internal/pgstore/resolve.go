package pgstore

import (
	"context"

	"github.com/voucherd/voucherd/internal/voucher"
)

var qCodeResolve = mustQuery("code_resolve")

// ResolveCode implements voucher.Store in one statement
// (code_resolve), which probes the same indexes whether code exists or not.
func (s *Store) ResolveCode(ctx context.Context, code, orderID string) (voucher.Resolution, error) {
	var (
		res      voucher.Resolution
		status   string
		schedule []byte
	)
	o := &res.Order
	err := scanVoucher(s.pool.QueryRow(ctx, qCodeResolve, code, orderID), &res.Voucher, &res.Found, &res.ByCampaign, &res.CodeHeld, &res.HasOrder,
		&o.OrderID, &o.VoucherCode, &o.CustomerID, &o.OrderAmount, &o.DiscountAmount, &status,
		&o.CreatedAt, &o.UpdatedAt, &o.ExpiresAt, &res.Voucher.Budget.Amount, &res.Voucher.Budget.Clip,
		&schedule, &res.Voucher.WindowLimit, &res.Voucher.Stacking.Stackable, &res.Voucher.Stacking.ExclusiveGroup)
	if err != nil {
		return voucher.Resolution{}, interpretError(err)
	}
	if res.Voucher.Schedule, err = parseSchedule(schedule); err != nil {
		return voucher.Resolution{}, interpretError(err)
	}
	if !res.Found {
		res.Voucher = voucher.Voucher{}
	}
	if !res.HasOrder {
		res.Order = voucher.Redemption{}
		return res, nil
	}
	o.Status = voucher.Status(status)
	o.CreatedAt, o.UpdatedAt, o.ExpiresAt = o.CreatedAt.UTC(), o.UpdatedAt.UTC(), o.ExpiresAt.UTC()
	return res, nil
}
