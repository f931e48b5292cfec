package redisgate

import (
	"context"

	"github.com/voucherd/voucherd/internal/voucher"
)

// confirmScript marks a hold confirmed before a Kafka-mode confirmation.
var confirmScript = newScript("confirm.lua", false)

// Confirm marks orderID's held hold confirmed before its confirmation is
// written to the store (Kafka mode), so that no replacement takes it over
// from then on (replace.lua takes only a held hold). campaignCode is the
// campaign code the confirmation names, "" for a voucher. The result says
// what the gate found: marked (now or before), pending, released, or
// nothing to go by (the voucher is not loaded, the orderId unknown or held
// with another code).
func (g *Gate) Confirm(ctx context.Context, code, orderID, campaignCode string) (voucher.GateConfirmation, error) {
	if err := checkCode(code); err != nil {
		return 0, err
	}
	if err := checkOrderID(orderID); err != nil {
		return 0, err
	}
	if err := checkCampaignCode(campaignCode); err != nil {
		return 0, err
	}
	client, err := g.conn()
	if err != nil {
		return 0, interpretError(err, "confirm", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := confirmScript.Exec(ctx, client, []string{k.remaining, k.orders, k.version},
		[]string{orderID, campaignCode}).AsInt64()
	if err != nil {
		return 0, interpretError(err, "confirm", code)
	}
	switch n {
	case 1:
		return voucher.GateConfirmMarked, nil
	case 2:
		return voucher.GateConfirmPending, nil
	case 3:
		return voucher.GateConfirmReleased, nil
	}
	return voucher.GateConfirmUnknown, nil
}
