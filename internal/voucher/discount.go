package voucher

import "strconv"

// Bounds of a percentage discount, in basis points (hundredths of a
// percent): 1% to 100%, in steps of 0.01%.
const (
	MinDiscountPercentBP = 100
	MaxDiscountPercentBP = 10_000
)

// Discount is what one use of a voucher takes off an order: either a fixed
// Amount, or PercentBP basis points of the order amount with an optional
// cap. Exactly one of Amount and PercentBP is set; Validate checks it.
type Discount struct {
	// Amount is a fixed discount in minor units, 0 for a percentage.
	Amount int64
	// PercentBP is the percentage in hundredths of a percent (1250 is
	// 12.5%), 0 for a fixed amount. It is an integer so that every copy of
	// the computation (Go, PL/pgSQL) gives the same answer.
	PercentBP int32
	// MaxAmount caps a percentage discount, in minor units; 0 is no cap.
	MaxAmount int64
}

// IsPercent reports whether d is a percentage of the order amount.
func (d Discount) IsPercent() bool { return d.PercentBP != 0 }

// Validate checks that d is exactly one kind of discount, within bounds.
func (d Discount) Validate() error {
	switch {
	case (d.Amount != 0) == (d.PercentBP != 0):
		return Errorf(CodeInvalidRequest, "exactly one of discountAmount and discountPercent is required")
	case d.PercentBP == 0 && (d.Amount < 0 || d.Amount > MaxAmount):
		return Errorf(CodeInvalidRequest, "discountAmount must be from 1 to %d", int64(MaxAmount))
	case d.PercentBP == 0 && d.MaxAmount != 0:
		return Errorf(CodeInvalidRequest, "maxDiscountAmount applies to a discountPercent only, not to a fixed discountAmount")
	case d.PercentBP != 0 && (d.PercentBP < MinDiscountPercentBP || d.PercentBP > MaxDiscountPercentBP):
		return Errorf(CodeInvalidRequest, "discountPercent must be from 1 to 100, with at most two decimals")
	case d.MaxAmount < 0 || d.MaxAmount > MaxAmount:
		return Errorf(CodeInvalidRequest, "maxDiscountAmount must be from 1 to %d", int64(MaxAmount))
	}
	return nil
}

// Compute returns the discount of an order of orderAmount minor units
// (0 to MaxAmount).
//
// A fixed discount is its Amount, but never more than the order amount: a
// discount larger than the order would pay the customer.
//
// A percentage is rounded down to the minor unit: floor(orderAmount ×
// PercentBP / 10000), then capped at MaxAmount when set. Rounding down
// never gives more than the stated percentage, so the discount is at most
// the order amount (PercentBP ≤ 10000) and at most the cap; it may be 0 for
// an order of a few minor units. The product is split so that it cannot
// overflow an int64 for any order amount up to MaxAmount; the PL/pgSQL copy
// (voucherd_discount) computes the same.
func (d Discount) Compute(orderAmount int64) int64 {
	if d.PercentBP == 0 {
		return min(d.Amount, max(orderAmount, 0))
	}
	if orderAmount <= 0 {
		return 0
	}
	bp := int64(d.PercentBP)
	off := orderAmount/10_000*bp + orderAmount%10_000*bp/10_000
	if d.MaxAmount > 0 && off > d.MaxAmount {
		return d.MaxAmount
	}
	return off
}

// FormatPercentBP writes a percentage in basis points as the API's decimal
// discountPercent: 1250 is "12.5", 2000 is "20", 1 is "0.01".
func FormatPercentBP(bp int32) string {
	s := strconv.FormatInt(int64(bp/100), 10)
	switch frac := bp % 100; {
	case frac == 0:
		return s
	case frac%10 == 0:
		return s + "." + strconv.Itoa(int(frac/10))
	case frac < 10:
		return s + ".0" + strconv.Itoa(int(frac))
	default:
		return s + "." + strconv.Itoa(int(frac))
	}
}
