package conformance

import "github.com/voucherd/voucherd/internal/voucher"

// StackVoucher is one voucher of a StackCase: its spec, its stacking
// setting, and how many of its uses other orders hold before the stack is
// asked.
type StackVoucher struct {
	Spec     VoucherSpec
	Stacking voucher.Stacking
	Held     int
}

// StackCase is one order presenting several codes (by name; each
// implementation gives the names codes of its own), asked at Now with
// Amount by one customer that holds nothing.
type StackCase struct {
	Name     string
	Vouchers map[string]StackVoucher
	Codes    []string
	Amount   int64
	// Want is the answer: the discounts of the codes in order, or the
	// refusal of one code (Failed); a refusal holds nothing anywhere.
	Want StackAnswer
}

// StackAnswer is the answer to a StackCase.
type StackAnswer struct {
	Discounts []int64
	Code      voucher.ErrorCode
	Reason    voucher.Reason
	Failed    string
}

// StackCases is the rule of orders of several codes: all or none, the
// stacking setting, discounts in the order given. Runners: the store's
// ReserveStack (pgstore TestConformanceStack), which the standard and
// flash-sync writes both use, and voucher.StackingRefusals for the rows
// refused by the setting (TestStackCasesSetting), which the validation of
// several codes uses too. The flash-sync takes are the per-code take of
// reserve.lua, which the per-code cases check.
var StackCases = []StackCase{
	{
		Name: "fixed then percentage on what is left",
		Vouchers: map[string]StackVoucher{
			"A": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1, Discount: voucher.Discount{Amount: 1000}}, Stacking: stackable},
			"B": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1, Discount: voucher.Discount{PercentBP: 1000}}, Stacking: stackable},
		},
		Codes: []string{"A", "B"}, Amount: 20000,
		Want: StackAnswer{Discounts: []int64{1000, 1900}},
	},
	{
		Name: "percentage first",
		Vouchers: map[string]StackVoucher{
			"A": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1, Discount: voucher.Discount{Amount: 1000}}, Stacking: stackable},
			"B": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1, Discount: voucher.Discount{PercentBP: 1000}}, Stacking: stackable},
		},
		Codes: []string{"B", "A"}, Amount: 20000,
		Want: StackAnswer{Discounts: []int64{2000, 1000}},
	},
	{
		Name: "the total never exceeds the order amount",
		Vouchers: map[string]StackVoucher{
			"A": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1, Discount: voucher.Discount{Amount: 1500}}, Stacking: stackable},
			"B": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1, Discount: voucher.Discount{Amount: 1000}}, Stacking: stackable},
		},
		Codes: []string{"A", "B"}, Amount: 2000,
		Want: StackAnswer{Discounts: []int64{1500, 500}},
	},
	{
		Name: "one code alone needs no setting",
		Vouchers: map[string]StackVoucher{
			"C": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}},
		},
		Codes: []string{"C"}, Amount: Amount,
		Want: StackAnswer{Discounts: []int64{100_000}},
	},
	{
		Name: "a later code held out refuses all",
		Vouchers: map[string]StackVoucher{
			"A": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}, Stacking: stackable},
			"B": {Spec: VoucherSpec{TotalLimit: 1, PerUserLimit: 1}, Stacking: stackable, Held: 1},
		},
		Codes: []string{"A", "B"}, Amount: Amount,
		Want: StackAnswer{Code: voucher.CodeHeldOut, Failed: "B"},
	},
	{
		Name: "an earlier code held out refuses all",
		Vouchers: map[string]StackVoucher{
			"A": {Spec: VoucherSpec{TotalLimit: 1, PerUserLimit: 1}, Stacking: stackable, Held: 1},
			"B": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}, Stacking: stackable},
		},
		Codes: []string{"A", "B"}, Amount: Amount,
		Want: StackAnswer{Code: voucher.CodeHeldOut, Failed: "A"},
	},
	{
		Name: "an ineligible code refuses all",
		Vouchers: map[string]StackVoucher{
			"A": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}, Stacking: stackable},
			"B": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1, Window: NotStarted}, Stacking: stackable},
		},
		Codes: []string{"A", "B"}, Amount: Amount,
		Want: StackAnswer{Code: voucher.CodeNotEligible, Reason: voucher.ReasonNotStarted, Failed: "B"},
	},
	{
		Name: "the minimum applies to what the earlier codes left",
		Vouchers: map[string]StackVoucher{
			"A": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1, Discount: voucher.Discount{Amount: 1000}}, Stacking: stackable},
			"B": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1, MinOrderAmount: 19500}, Stacking: stackable},
		},
		Codes: []string{"A", "B"}, Amount: 20000,
		Want: StackAnswer{Code: voucher.CodeNotEligible, Reason: voucher.ReasonOrderAmountTooLow, Failed: "B"},
	},
	{
		Name: "not stackable",
		Vouchers: map[string]StackVoucher{
			"A": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}, Stacking: stackable},
			"C": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}},
		},
		Codes: []string{"A", "C"}, Amount: Amount,
		Want: StackAnswer{Code: voucher.CodeNotEligible, Reason: voucher.ReasonNotStackable, Failed: "C"},
	},
	{
		Name: "two codes of one exclusive group",
		Vouchers: map[string]StackVoucher{
			"G1": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}, Stacking: voucher.Stacking{Stackable: true, ExclusiveGroup: "seasonal"}},
			"A":  {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}, Stacking: stackable},
			"G2": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}, Stacking: voucher.Stacking{Stackable: true, ExclusiveGroup: "seasonal"}},
		},
		Codes: []string{"G1", "A", "G2"}, Amount: Amount,
		Want: StackAnswer{Code: voucher.CodeNotEligible, Reason: voucher.ReasonExclusiveGroup, Failed: "G2"},
	},
	{
		Name: "the setting is checked before the stock",
		Vouchers: map[string]StackVoucher{
			"A": {Spec: VoucherSpec{TotalLimit: 1, PerUserLimit: 1}, Stacking: stackable, Held: 1},
			"C": {Spec: VoucherSpec{TotalLimit: 10, PerUserLimit: 1}},
		},
		Codes: []string{"A", "C"}, Amount: Amount,
		Want: StackAnswer{Code: voucher.CodeNotEligible, Reason: voucher.ReasonNotStackable, Failed: "C"},
	},
}

var stackable = voucher.Stacking{Stackable: true}
