package conformance

import "github.com/voucherd/voucherd/internal/voucher"

// The implementations of replacement.
const (
	// Replace is voucherd_replace: it decides every ReplaceCase.
	Replace Impl = "voucherd_replace"
	// ReplaceScript is replace.lua: the ReplaceCases it decides.
	ReplaceScript Impl = "replace.lua"
)

// AcceptsValidation reports whether v, a validation's answer, is what a
// reservation answering a would mean: valid (a replay for a replay) for a
// use taken or replayed, else the same code and reason.
func (a Answer) AcceptsValidation(v voucher.Validation) bool {
	if a.Code == "" {
		return v.Valid && v.Replay == a.Replay
	}
	return !v.Valid && v.Reason == a.Reason &&
		(v.Code == a.Code && (a.Limit == "" || v.Limit == a.Limit) || (a.Or != "" && v.Code == a.Or))
}

// ReplaceRequest is one reservation that names the order it replaces.
type ReplaceRequest struct {
	Customer string
	Order    string
	Replaces string
	Amount   int64 // Amount when 0
	// CodeIndex is the campaign code presented, for a campaign case.
	CodeIndex int
}

// OrderAmount is the request's order amount.
func (r ReplaceRequest) OrderAmount() int64 {
	if r.Amount == 0 {
		return Amount
	}
	return r.Amount
}

// ReplaceCase is one situation of a replacement: a voucher, its steps, the
// replacements asked one after the other, their answers, and then plain
// reservations asked after them with their answers (what the replacement
// left: the replaced order released, the use still held, no use freed).
type ReplaceCase struct {
	Name     string
	Voucher  VoucherSpec
	Before   []Step
	Requests []ReplaceRequest
	Want     []Answer
	// After are reservations asked once the replacements ran.
	After     []Request
	WantAfter []Answer
	// Skip lists the implementations that do not decide this case, with
	// the reason.
	Skip map[Impl]string
}

// Skips reports why impl does not run c, "" when it does.
func (c ReplaceCase) Skips(impl Impl) string { return c.Skip[impl] }

var notHeld = Answer{Code: voucher.CodeReplacedOrderNotHeld}

func replace(c string, o, replaces string) ReplaceRequest {
	return ReplaceRequest{Customer: c, Order: o, Replaces: replaces}
}

// replaceK is a replacement presenting campaign code k.
func replaceK(c string, o, replaces string, k int) ReplaceRequest {
	return ReplaceRequest{Customer: c, Order: o, Replaces: replaces, CodeIndex: k}
}

// ReplaceCases are the rule of replacesOrderId. Their codes are
// Code(len(Cases)+i), so both tables can share one database. The fault
// suite's model (Model) runs them too.
var ReplaceCases = []ReplaceCase{
	{Name: "replacement takes over the last use", Voucher: VoucherSpec{TotalLimit: 1, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1")},
		Requests: []ReplaceRequest{replace("1", "o2", "o1")}, Want: []Answer{taken},
		After: []Request{req("1", "o1"), req("2", "o3"), req("1", "o2"), req("1", "o4")},
		// The replaced order is released, the use still held by o2 (the
		// customer's quota too: PL/pgSQL checks stock first, reserve.lua
		// the quota), o2 replays.
		WantAfter: []Answer{released, heldOut, replay, {Code: voucher.CodeHeldOut, Or: voucher.CodeAlreadyUsed}}},
	{Name: "replay of a replacement", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1")},
		Requests: []ReplaceRequest{replace("1", "o2", "o1"), replace("1", "o2", "o1")}, Want: []Answer{taken, replay},
		After: []Request{req("2", "o3"), req("3", "o4")}, WantAfter: []Answer{taken, heldOut}},
	{Name: "replacing an unknown order", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Requests: []ReplaceRequest{replace("1", "o2", "o1")}, Want: []Answer{notHeld},
		After: []Request{req("1", "o2")}, WantAfter: []Answer{taken}},
	{Name: "replacing another customer's order", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1")},
		Requests: []ReplaceRequest{replace("2", "o2", "o1")}, Want: []Answer{notHeld},
		After: []Request{req("1", "o1"), req("2", "o2")}, WantAfter: []Answer{replay, taken}},
	{Name: "replacing a released order", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), release("o1")},
		Requests: []ReplaceRequest{replace("1", "o2", "o1")}, Want: []Answer{notHeld}},
	{Name: "replacing a confirmed order", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), confirm("o1")},
		Requests: []ReplaceRequest{replace("1", "o2", "o1")}, Want: []Answer{notHeld},
		After: []Request{req("1", "o1")}, WantAfter: []Answer{replay},
		Skip: map[Impl]string{ReplaceScript: "the gate does not record confirmations; the store refuses the write and the service undoes the swap (Gate.Unreplace)"}},
	{Name: "replacing an order of another voucher", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{{Kind: StepReserve, Customer: "1", Order: "o1", OtherVoucher: true}},
		Requests: []ReplaceRequest{replace("1", "o2", "o1")}, Want: []Answer{notHeld},
		Skip: map[Impl]string{ReplaceScript: perVoucher, Model: oneVoucher}},
	{Name: "a replaced order cannot be replaced again", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1")},
		Requests: []ReplaceRequest{replace("1", "o2", "o1"), replace("1", "o3", "o1")}, Want: []Answer{taken, notHeld},
		After: []Request{req("1", "o3")}, WantAfter: []Answer{quota}},
	{Name: "replacement with a known orderId of another customer", Voucher: VoucherSpec{TotalLimit: 3, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), reserve("2", "o2")},
		Requests: []ReplaceRequest{replace("1", "o2", "o1")}, Want: []Answer{conflict},
		After: []Request{req("1", "o1")}, WantAfter: []Answer{replay}},
	{Name: "ineligible replacement keeps the hold", Voucher: VoucherSpec{TotalLimit: 1, PerUserLimit: 1, MinOrderAmount: 1000},
		Before:   []Step{reserve("1", "o1")},
		Requests: []ReplaceRequest{{Customer: "1", Order: "o2", Replaces: "o1", Amount: 10}},
		Want:     []Answer{{Code: voucher.CodeNotEligible, Reason: voucher.ReasonOrderAmountTooLow}},
		After:    []Request{req("1", "o1"), req("2", "o3")}, WantAfter: []Answer{replay, heldOut},
		Skip: map[Impl]string{ReplaceScript: eligibleFirst, Model: oneVoucher}},
	{Name: "replacement on a voucher with uses of others", Voucher: VoucherSpec{TotalLimit: 3, PerUserLimit: 2},
		Before:   []Step{reserve("1", "o1"), reserve("2", "o2"), reserve("1", "o3")},
		Requests: []ReplaceRequest{replace("1", "o4", "o3")}, Want: []Answer{taken},
		After: []Request{req("3", "o5"), req("1", "o6"), req("1", "o3")}, WantAfter: []Answer{heldOut, {Code: voucher.CodeHeldOut, Or: voucher.CodeAlreadyUsed}, released}},

	// Campaigns: the replaced order is the customer's hold on the campaign
	// with any of its codes; its code comes free and the new order takes
	// the code it presents, unless an order other than the replaced one
	// holds that code (CODE_USED, checked after the replaced order).
	{Name: "campaign: a replacement keeps its code", Voucher: campaign(2, 1),
		Before:   []Step{reserveK("1", "o1", 0)},
		Requests: []ReplaceRequest{replaceK("1", "o2", "o1", 0)}, Want: []Answer{taken},
		After:     []Request{reqK("2", "o3", 0), reqK("1", "o1", 0), reqK("1", "o2", 0)},
		WantAfter: []Answer{codeUsed, released, replay}},
	{Name: "campaign: a replacement with another code frees the old one", Voucher: campaign(3, 1),
		Before:   []Step{reserveK("1", "o1", 0)},
		Requests: []ReplaceRequest{replaceK("1", "o2", "o1", 1)}, Want: []Answer{taken},
		After: []Request{reqK("2", "o3", 0), reqK("3", "o4", 1)}, WantAfter: []Answer{taken, codeUsed}},
	{Name: "campaign: a replacement takes over the last use", Voucher: campaign(1, 1),
		Before:   []Step{reserveK("1", "o1", 0)},
		Requests: []ReplaceRequest{replaceK("1", "o2", "o1", 2)}, Want: []Answer{taken},
		After: []Request{reqK("2", "o3", 0), reqK("1", "o2", 2)}, WantAfter: []Answer{heldOut, replay}},
	{Name: "campaign: a replacement presenting a code another order holds", Voucher: campaign(3, 1),
		Before:   []Step{reserveK("1", "o1", 0), reserveK("2", "o2", 1)},
		Requests: []ReplaceRequest{replaceK("1", "o3", "o1", 1)}, Want: []Answer{codeUsed},
		After: []Request{reqK("1", "o1", 0), reqK("3", "o4", 2)}, WantAfter: []Answer{replay, taken}},
	{Name: "campaign: a replacement presenting a confirmed order's code", Voucher: campaign(3, 1),
		Before:   []Step{reserveK("2", "o2", 1), confirm("o2"), reserveK("1", "o1", 0)},
		Requests: []ReplaceRequest{replaceK("1", "o3", "o1", 1)}, Want: []Answer{codeUsed},
		After: []Request{reqK("1", "o1", 0)}, WantAfter: []Answer{replay}},
	{Name: "campaign: the replaced order is checked before the code", Voucher: campaign(5, 5),
		Before:   []Step{reserveK("1", "o1", 0), reserveK("2", "o2", 1)},
		Requests: []ReplaceRequest{replaceK("3", "o3", "o1", 1)}, Want: []Answer{notHeld},
		After: []Request{reqK("1", "o1", 0)}, WantAfter: []Answer{replay}},
	{Name: "campaign: a replacement asked again with another code", Voucher: campaign(2, 1),
		Before:   []Step{reserveK("1", "o1", 0)},
		Requests: []ReplaceRequest{replaceK("1", "o2", "o1", 1), replaceK("1", "o2", "o1", 2), replaceK("1", "o2", "o1", 1)},
		Want:     []Answer{taken, conflict, replay},
		After:    []Request{reqK("2", "o3", 2)}, WantAfter: []Answer{taken}},
}
