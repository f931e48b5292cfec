package voucher

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDiscountCompute(t *testing.T) {
	t.Parallel()
	pct := func(bp int32, max int64) Discount { return Discount{PercentBP: bp, MaxAmount: max} }
	cases := []struct {
		name  string
		d     Discount
		order int64
		want  int64
	}{
		{"fixed", Discount{Amount: 5000}, 120_000, 5000},
		{"fixed above the order amount: the order amount", Discount{Amount: 5000}, 10, 10},
		{"fixed on an order of 0", Discount{Amount: 5000}, 0, 0},
		{"fixed equal to the order amount", Discount{Amount: 5000}, 5000, 5000},
		{"20%", pct(2000, 0), 120_000, 24_000},
		{"20% capped", pct(2000, 50_000), 1_000_000, 50_000},
		{"20% just under the cap", pct(2000, 50_000), 249_999, 49_999},
		{"20% at the cap", pct(2000, 50_000), 250_000, 50_000},
		{"20% just over the cap", pct(2000, 50_000), 250_005, 50_000},
		{"cap of 1", pct(10_000, 1), 1_000_000, 1},
		{"cap above everything", pct(10_000, MaxAmount), MaxAmount, MaxAmount},
		{"100% is the order amount", pct(10_000, 0), 123_457, 123_457},
		{"100% of 1", pct(10_000, 0), 1, 1},
		{"100% of the largest order", pct(10_000, 0), MaxAmount, MaxAmount},
		{"1% rounds down", pct(100, 0), 199, 1},
		{"1% of 99 is 0", pct(100, 0), 99, 0},
		{"1% of 100 is 1", pct(100, 0), 100, 1},
		{"0.01% (the resolution) of 9999 is 0", pct(1, 0), 9999, 0},
		{"0.01% of 10000 is 1", pct(1, 0), 10_000, 1},
		{"0.01% of the largest order", pct(1, 0), MaxAmount, 100_000_000_000},
		{"12.5% of 1", pct(1250, 0), 1, 0},
		{"12.5% of 8", pct(1250, 0), 8, 1},
		{"12.5% of 15 rounds down, not half up", pct(1250, 0), 15, 1},
		{"33.33% of 300", pct(3333, 0), 300, 99},
		{"99.99% of 10001", pct(9999, 0), 10_001, 9999},
		{"99.99% of the largest order", pct(9999, 0), MaxAmount, 999_900_000_000_000},
		{"99.99% of the largest order less one", pct(9999, 0), MaxAmount - 1, 999_899_999_999_999},
		{"order of 0", pct(5000, 0), 0, 0},
	}
	for _, c := range cases {
		require.Equal(t, c.want, c.d.Compute(c.order), c.name)
		if c.d.IsPercent() {
			require.Equal(t, c.want, exactFloor(c.d, c.order), "%s: the exact rounded-down value", c.name)
			require.LessOrEqual(t, c.want, c.order, c.name)
		}
	}
}

// exactFloor is the rule computed in arbitrary precision.
func exactFloor(d Discount, order int64) int64 {
	n := new(big.Int).Mul(big.NewInt(order), big.NewInt(int64(d.PercentBP)))
	n.Quo(n, big.NewInt(10_000))
	if d.MaxAmount > 0 && n.Cmp(big.NewInt(d.MaxAmount)) > 0 {
		return d.MaxAmount
	}
	return n.Int64()
}

// Compute agrees with the exact rule, never exceeds the order amount or the
// cap, and never overflows, over the whole range of order amounts.
func FuzzDiscountCompute(f *testing.F) {
	f.Add(int64(120_000), int32(2000), int64(0))
	f.Add(int64(MaxAmount), int32(9999), int64(MaxAmount))
	f.Fuzz(func(t *testing.T, order int64, bp int32, max int64) {
		order = abs(order) % (MaxAmount + 1)
		bp = int32(abs(int64(bp))%MaxDiscountPercentBP) + 1
		max = abs(max) % (MaxAmount + 1)
		d := Discount{PercentBP: bp, MaxAmount: max}
		got := d.Compute(order)
		require.Equal(t, exactFloor(d, order), got)
		require.GreaterOrEqual(t, got, int64(0))
		require.LessOrEqual(t, got, order)
		if max > 0 {
			require.LessOrEqual(t, got, max)
		}
	})
}

func abs(n int64) int64 {
	if n < 0 {
		return -(n + 1)
	}
	return n
}

func TestDiscountValidate(t *testing.T) {
	t.Parallel()
	for _, d := range []Discount{
		{Amount: 1}, {Amount: MaxAmount}, {PercentBP: 100}, {PercentBP: 10_000},
		{PercentBP: 1250, MaxAmount: 1}, {PercentBP: 1250, MaxAmount: MaxAmount},
	} {
		require.NoError(t, d.Validate(), "%+v", d)
	}
	for d, msg := range map[Discount]string{
		{}:                              "exactly one of discountAmount and discountPercent",
		{Amount: 1, PercentBP: 100}:     "exactly one of discountAmount and discountPercent",
		{Amount: -1}:                    "discountAmount must be from 1",
		{Amount: MaxAmount + 1}:         "discountAmount must be from 1",
		{Amount: 1, MaxAmount: 5}:       "maxDiscountAmount applies to a discountPercent only",
		{PercentBP: 99}:                 "discountPercent must be from 1 to 100",
		{PercentBP: 10_001}:             "discountPercent must be from 1 to 100",
		{PercentBP: 100, MaxAmount: -1}: "maxDiscountAmount must be from 1",
		{PercentBP: 100, MaxAmount: MaxAmount + 1}: "maxDiscountAmount must be from 1",
	} {
		err := d.Validate()
		require.ErrorContains(t, err, msg, "%+v", d)
		require.Equal(t, CodeInvalidRequest, CodeOf(err))
	}
}

func TestFormatPercentBP(t *testing.T) {
	t.Parallel()
	for bp, want := range map[int32]string{1: "0.01", 10: "0.1", 100: "1", 1250: "12.5", 1205: "12.05", 3333: "33.33", 10_000: "100"} {
		require.Equal(t, want, FormatPercentBP(bp))
	}
}

// A patch sets one kind of discount: a fixed amount drops a percentage and
// its cap; a percentage keeps the cap of a percentage unless it sets one; a
// cap comes with a percentage, whatever the voucher's kind.
func TestPatchDiscount(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	fixed := Voucher{Code: "P", DiscountAmount: 5000, TotalLimit: 1, PerUserLimit: 1, StartsAt: start, EndsAt: start.Add(time.Hour)}
	pctV := fixed
	pctV.DiscountAmount, pctV.DiscountPercentBP, pctV.MaxDiscountAmount = 0, 2000, 40_000
	i64 := func(n int64) *int64 { return &n }
	i32 := func(n int32) *int32 { return &n }

	v, err := Patch{DiscountPercentBP: i32(1000)}.Apply(fixed)
	require.NoError(t, err)
	require.Equal(t, Discount{PercentBP: 1000}, v.Discount())

	v, err = Patch{DiscountPercentBP: i32(1000), MaxDiscountAmount: i64(7)}.Apply(fixed)
	require.NoError(t, err)
	require.Equal(t, Discount{PercentBP: 1000, MaxAmount: 7}, v.Discount())

	v, err = Patch{DiscountPercentBP: i32(1500)}.Apply(pctV)
	require.NoError(t, err)
	require.Equal(t, Discount{PercentBP: 1500, MaxAmount: 40_000}, v.Discount())

	v, err = Patch{DiscountPercentBP: i32(2000), MaxDiscountAmount: i64(1)}.Apply(pctV)
	require.NoError(t, err)
	require.Equal(t, Discount{PercentBP: 2000, MaxAmount: 1}, v.Discount())

	v, err = Patch{DiscountAmount: i64(300)}.Apply(pctV)
	require.NoError(t, err)
	require.Equal(t, Discount{Amount: 300}, v.Discount())

	for _, v := range []Voucher{fixed, pctV} {
		_, err = Patch{MaxDiscountAmount: i64(1)}.Apply(v)
		require.ErrorContains(t, err, "maxDiscountAmount is set together with discountPercent")
	}
	_, err = Patch{DiscountAmount: i64(1), DiscountPercentBP: i32(100)}.Apply(fixed)
	require.ErrorContains(t, err, "discountAmount cannot be set with discountPercent or maxDiscountAmount")
	_, err = Patch{DiscountAmount: i64(1), MaxDiscountAmount: i64(100)}.Apply(pctV)
	require.ErrorContains(t, err, "discountAmount cannot be set with discountPercent or maxDiscountAmount")
	require.False(t, Patch{MaxDiscountAmount: i64(1)}.Empty())
	require.False(t, Patch{DiscountPercentBP: i32(100)}.Empty())
}

// The audit trail records the kind of discount a voucher has.
func TestAuditFieldsDiscount(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	v := Voucher{Code: "P", DiscountPercentBP: 1250, MaxDiscountAmount: 40_000, TotalLimit: 1, PerUserLimit: 1,
		StartsAt: start, EndsAt: start.Add(time.Hour)}
	got := string(AuditFields(v))
	require.Contains(t, got, `"discountPercent":12.5,"maxDiscountAmount":40000`)
	require.NotContains(t, got, "discountAmount")
	v.DiscountAmount, v.DiscountPercentBP, v.MaxDiscountAmount = 300, 0, 0
	got = string(AuditFields(v))
	require.Contains(t, got, `"discountAmount":300`)
	require.NotContains(t, got, "discountPercent")
	require.NotContains(t, got, "maxDiscountAmount")
}
