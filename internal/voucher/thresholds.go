package voucher

import (
	"context"
	"log/slog"
	"math"
	"time"
)

// Threshold events: when a voucher's free uses drop below a share
// of its total limit, and when they reach zero, the service emits one
// VoucherLowStock or VoucherSoldOut event per crossing, so that a shop can
// switch banners or stop promoting the code.
//
// Exactly once per crossing, across concurrent requests and instances: a
// crossing is a property of one take, the one that moved the free uses from
// at or above the threshold to below it, and every take is decided by one
// atomic step that also reports the stock right after it (Reservation.Taken):
// the voucher row update under its row lock in standard and flash-sync mode,
// the gate's script in flash-Kafka mode. Only takes that stand are counted:
// a take whose durable write failed (and was given back) reports nothing,
// and the next take that crosses does. Releases and expiries raise the free
// uses again; a later take that crosses once more is a new crossing. A PATCH
// that moves the threshold crosses nothing by itself.

// ThresholdType names a threshold event.
type ThresholdType string

// Threshold event types, also their names on the events topic.
const (
	ThresholdLowStock ThresholdType = "VoucherLowStock"
	ThresholdSoldOut  ThresholdType = "VoucherSoldOut"
)

// DefaultLowStockShare is the default of ServiceConfig.LowStockShare.
const DefaultLowStockShare = 0.1

// ThresholdEvent is one crossing.
type ThresholdEvent struct {
	Type ThresholdType
	Code string
	// TotalLimit and Remaining are the voucher's stock right after the take
	// that crossed.
	TotalLimit int32
	Remaining  int64
	// Threshold is the number of free uses below which the voucher is low
	// on stock (VoucherLowStock; 0 for VoucherSoldOut).
	Threshold int64
	// OrderID is the reservation whose take crossed.
	OrderID string
	// Mode is the path that took it.
	Mode Mode
	// At is when the service saw the crossing.
	At time.Time
}

// Notifier publishes threshold events (the Kafka events topic). Notify is
// called on the request path after the answer is decided: it must not
// block, and it may drop an event it cannot take (its delivery is at most
// once; the log line and the metric are the record).
type Notifier interface {
	Notify(e ThresholdEvent)
}

// LowStockThreshold is the number of free uses below which a voucher of
// totalLimit uses is low on stock with the given share: free < share ×
// totalLimit, that is free < ceil(share × totalLimit). 0 disables.
func LowStockThreshold(totalLimit int32, share float64) int64 {
	if share <= 0 || totalLimit <= 0 {
		return 0
	}
	// The tolerance keeps a product that floating point puts a hair above an
	// integer (0.1 × 30 = 3.0000000000000004) from rounding up.
	return int64(math.Ceil(share*float64(totalLimit) - 1e-9))
}

// Crossings returns the threshold events a take that left stock crossed,
// low stock first: the free uses were at or above a threshold before the
// take (one more than after it) and are below it after.
func Crossings(stock Stock, share float64) []ThresholdType {
	after := stock.Remaining
	before := after + 1
	var out []ThresholdType
	if t := LowStockThreshold(stock.TotalLimit, share); t > 0 && before >= t && after < t {
		out = append(out, ThresholdLowStock)
	}
	if before > 0 && after <= 0 {
		out = append(out, ThresholdSoldOut)
	}
	return out
}

// noteTake emits the threshold events of a reservation that took a use. It
// runs after the answer is decided; the log line and the metric are cheap
// and the notifier does not block.
func (s *Service) noteTake(res Reservation, mode Mode) {
	if res.Taken == nil || res.Replay || s.cfg.LowStockShare < 0 {
		return
	}
	types := Crossings(*res.Taken, s.cfg.LowStockShare)
	if len(types) == 0 {
		return
	}
	now := s.cfg.Clock().UTC()
	for _, typ := range types {
		e := ThresholdEvent{
			Type: typ, Code: res.VoucherCode, TotalLimit: res.Taken.TotalLimit, Remaining: res.Taken.Remaining,
			OrderID: res.OrderID, Mode: mode, At: now,
		}
		if typ == ThresholdLowStock {
			e.Threshold = LowStockThreshold(e.TotalLimit, s.cfg.LowStockShare)
		}
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "voucher threshold crossed",
			slog.String("event", string(e.Type)), slog.String("code", e.Code),
			slog.Int64("remaining", e.Remaining), slog.Int64("totalLimit", int64(e.TotalLimit)),
			slog.Int64("threshold", e.Threshold), slog.String("orderId", e.OrderID), slog.String("mode", string(e.Mode)))
		s.obs.Threshold(e)
		if s.cfg.Notifier != nil {
			s.cfg.Notifier.Notify(e)
		}
	}
}
