// Package conformance holds the reservation rule as data: cases, each a
// voucher, what happened to it before, the requests asked and the answers
// the rule gives. Every implementation of the rule runs every case that it
// decides, in its own package's tests: voucherd_reserve_one and
// voucherd_reserve_batch (pgstore), reserve.lua and the sold-out cache's
// copy of it (redisgate), the fault suite's model (faults) and
// voucher.Voucher.CheckEligible (this package); voucherd_validate and
// validate.lua answer each case's last request as a validation that must
// agree with it and change nothing; ReplaceCases (replace.go) are run by
// voucherd_replace, replace.lua and the fault suite's model. Adding a rule
// means adding rows here; an implementation that answers otherwise fails
// its test.
// docs/rules.md lists where each rule is implemented and why.
package conformance

import (
	"errors"
	"fmt"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Impl names one implementation of the rule.
type Impl string

// The implementations that run the cases.
const (
	Reserve      Impl = "voucherd_reserve_one"
	ReserveBatch Impl = "voucherd_reserve_batch"
	Script       Impl = "reserve.lua"
	SoldOutCache Impl = "sold-out cache"
	Model        Impl = "fault model"
	Eligibility  Impl = "Voucher.CheckEligible"
)

// Window places the voucher's validity window around Now.
type Window int

// Windows.
const (
	Open       Window = iota // started before Now, ends long after
	NotStarted               // starts after Now
	Ended                    // ended before Now
)

// Base is the start of an open window; Now is the clock of every request
// and step, an hour into it.
var (
	Base = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	Now  = Base.Add(time.Hour)
)

// TTL is the reservation TTL of every reservation the cases make.
const TTL = 15 * time.Minute

// Amount is the order amount of a request that does not set one.
const Amount = 250_000

// VoucherSpec is the voucher of a case.
type VoucherSpec struct {
	TotalLimit     int32
	PerUserLimit   int32
	MinOrderAmount int64
	Window         Window
	// Disabled: the voucher was stopped.
	Disabled bool
	// Missing: the voucher does not exist.
	Missing bool
	// Discount is the voucher's discount; zero is a fixed 100,000.
	Discount voucher.Discount
	// Campaign: the voucher is the budget of a campaign whose codes
	// (CampaignCode) the steps and requests present, never its own code.
	Campaign bool
	// Budget is the voucher's money budget (Amount and Clip; zero: none).
	Budget voucher.Budget
	// Currency is the voucher's currency ("": any); the steps are asked in
	// it.
	Currency string
	// Customer is the one customer the voucher serves ("": every one).
	Customer string
	// CodeCustomers binds campaign codes (by index) to one customer each:
	// the codes a shop imports with a customerId.
	CodeCustomers map[int]string
	// Windows gives the voucher recurring windows (Schedule): none, ones
	// whose current occurrence covers Now (and a previous one covers
	// Earlier), or ones that do not cover Now.
	Windows WindowPlace
	// WindowLimit is the quota per occurrence (0: none; with Windows).
	WindowLimit int32
}

// WindowPlace places a voucher's recurring windows around Now.
type WindowPlace int

// Window places.
const (
	NoWindows WindowPlace = iota
	// InWindow: every day 00:00-00:50 and 00:50-01:30 UTC: Now (01:00) is
	// in the second occurrence, Earlier (00:48) in the first, whose holds
	// (TTL 15 minutes) are still RESERVED at Now.
	InWindow
	// OutsideWindows: every day 12:00-13:00 UTC.
	OutsideWindows
)

// Earlier is the clock of a step taken in the occurrence before Now's
// (Step.Earlier).
var Earlier = Now.Add(-12 * time.Minute)

// Windowed reports whether the voucher has recurring windows.
func (s VoucherSpec) Windowed() bool { return s.Windows != NoWindows }

// schedule is the Schedule of a window place.
func (p WindowPlace) schedule() *voucher.Schedule {
	every := []string{"MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"}
	switch p {
	case InWindow:
		return &voucher.Schedule{TimeZone: "UTC", Windows: []voucher.Window{
			{Days: every, From: "00:00", To: "00:50"}, {Days: every, From: "00:50", To: "01:30"}}}
	case OutsideWindows:
		return &voucher.Schedule{TimeZone: "UTC", Windows: []voucher.Window{{Days: every, From: "12:00", To: "13:00"}}}
	}
	return nil
}

// Occurrence is the start of the occurrence of the voucher's windows a
// reservation at at is taken in (zero: none), as the service computes it.
func (s VoucherSpec) Occurrence(at time.Time) time.Time {
	return s.Voucher("X").Occurrence(at).Start
}

// At is when step st was taken: Earlier or Now.
func (st Step) At() time.Time {
	if st.Earlier {
		return Earlier
	}
	return Now
}

// CampaignCodes is the number of codes of a campaign case.
const CampaignCodes = 3

// Voucher returns the voucher of spec with the given code.
func (s VoucherSpec) Voucher(code string) voucher.Voucher {
	v := voucher.Voucher{Code: code, DiscountAmount: 100_000, MinOrderAmount: s.MinOrderAmount,
		TotalLimit: s.TotalLimit, PerUserLimit: s.PerUserLimit, StartsAt: Base, EndsAt: Base.Add(30 * 24 * time.Hour),
		Disabled: s.Disabled, Currency: s.Currency, CustomerID: s.Customer, Budget: s.Budget,
		Schedule: s.Windows.schedule(), WindowLimit: s.WindowLimit}
	if s.Discount != (voucher.Discount{}) {
		v.DiscountAmount, v.DiscountPercentBP, v.MaxDiscountAmount = s.Discount.Amount, s.Discount.PercentBP, s.Discount.MaxAmount
	}
	switch s.Window {
	case NotStarted:
		v.StartsAt, v.EndsAt = Now.Add(time.Hour), Now.Add(48*time.Hour)
	case Ended:
		v.EndsAt = Now.Add(-time.Minute)
	}
	return v
}

// StepKind is what a step did.
type StepKind int

// Steps.
const (
	StepReserve StepKind = iota + 1 // took a use (it must succeed)
	StepRelease                     // gave the order's use back
	StepConfirm                     // confirmed the order
)

// Step is one thing that happened before the requests, at Now.
type Step struct {
	Kind     StepKind
	Customer string
	Order    string
	// OtherVoucher: the step was on another voucher (open, roomy), not
	// the case's.
	OtherVoucher bool
	// CodeIndex is the campaign code presented, for a campaign case.
	CodeIndex int
	// Earlier: a reservation taken at Earlier, in the occurrence of the
	// voucher's windows before Now's (releases and confirmations are at
	// Now).
	Earlier bool
}

// Request is one reservation asked of the case's voucher at Now.
type Request struct {
	Customer string
	Order    string
	Amount   int64 // Amount when 0
	// CodeIndex is the campaign code presented, for a campaign case.
	CodeIndex int
	// Budget: the request names the campaign's own code (its budget).
	Budget bool
	// Currency is the currency the request names ("": none).
	Currency string
}

// Purchase is what the eligibility rule knows of the request.
func (r Request) Purchase() voucher.Purchase {
	return voucher.Purchase{Amount: r.OrderAmount(), CustomerID: r.Customer, Currency: r.Currency}
}

// OrderAmount is the request's order amount.
func (r Request) OrderAmount() int64 {
	if r.Amount == 0 {
		return Amount
	}
	return r.Amount
}

// Answer is what the rule answers one request.
type Answer struct {
	// Code is "" for a use taken or replayed.
	Code   voucher.ErrorCode
	Reason voucher.Reason
	Replay bool
	// Or is a second acceptable code, where two limits bind at once and
	// implementations check them in different orders; both take nothing.
	Or voucher.ErrorCode
	// Discount, when set, is the discountAmount a use taken or replayed
	// answers: the one computed for the order that took it. The gate and
	// the fault model are given the discount, so only the store's
	// functions and Voucher.Discount are checked against it.
	Discount *int64
	// Limit is, when set, the limit the refusal Code names (the one Or
	// names is not checked).
	Limit voucher.Limit
}

// String is the answer in a word or two.
func (a Answer) String() string {
	switch {
	case a.Code == "" && a.Replay && a.Discount != nil:
		return fmt.Sprintf("replay (discount %d)", *a.Discount)
	case a.Code == "" && a.Discount != nil:
		return fmt.Sprintf("taken (discount %d)", *a.Discount)
	case a.Code == "" && a.Replay:
		return "replay"
	case a.Code == "":
		return "taken"
	case a.Reason != "":
		return string(a.Code) + "/" + string(a.Reason)
	case a.Or != "":
		return string(a.Code) + limitSuffix(a.Limit) + "|" + string(a.Or)
	}
	return string(a.Code) + limitSuffix(a.Limit)
}

// limitSuffix is " (limit l)", "" for none.
func limitSuffix(l voucher.Limit) string {
	if l == "" {
		return ""
	}
	return " (limit " + string(l) + ")"
}

// Accepts reports whether got, an implementation's answer, is a.
func (a Answer) Accepts(got Answer) bool {
	if got.Replay != a.Replay || got.Reason != a.Reason {
		return false
	}
	if a.Discount != nil && (got.Discount == nil || *got.Discount != *a.Discount) {
		return false
	}
	if got.Code == a.Code {
		return a.Limit == "" || got.Limit == a.Limit
	}
	return a.Or != "" && got.Code == a.Or
}

// AnswerOf is the Answer of a reservation's result; an error outside the
// vocabulary is CodeInternal.
func AnswerOf(res voucher.Reservation, err error) Answer {
	if err != nil {
		var ve *voucher.Error
		if !errors.As(err, &ve) {
			return Answer{Code: voucher.CodeInternal}
		}
		return Answer{Code: ve.Code, Reason: ve.Reason, Limit: ve.Limit}
	}
	d := res.DiscountAmount
	return Answer{Replay: res.Replay, Discount: &d}
}

// Gate is the answer as the Redis gate gives it: the gate tells no held-out
// from sold-out (the service does, from the store's holds), and answers
// no eligibility (the service checks it before asking).
func (a Answer) Gate() (want, or voucher.GateOutcome) {
	if a.Code == voucher.CodeAlreadyUsed && a.Reason == voucher.ReasonCodeUsed {
		return voucher.GateCodeUsed, gateOutcome(a.Or, false)
	}
	if a.Limit == voucher.LimitWindow {
		return voucher.GateWindowFull, gateOutcome(a.Or, false)
	}
	return gateOutcome(a.Code, a.Replay), gateOutcome(a.Or, false)
}

func gateOutcome(code voucher.ErrorCode, replay bool) voucher.GateOutcome {
	switch code {
	case "":
		if replay {
			return voucher.GateReplay
		}
		return voucher.GateTaken
	case voucher.CodeOrderConflict:
		return voucher.GateConflict
	case voucher.CodeOrderReleased:
		return voucher.GateReleased
	case voucher.CodeAlreadyUsed:
		return voucher.GateQuotaHeld
	case voucher.CodeOutOfStock, voucher.CodeHeldOut:
		return voucher.GateSoldOut
	case voucher.CodeReplacedOrderNotHeld:
		return voucher.GateNotHeld
	case voucher.CodeBudgetExceeded:
		return voucher.GateBudgetExceeded
	}
	return 0
}

// Case is one situation and the rule's answers to it.
type Case struct {
	Name    string
	Voucher VoucherSpec
	Before  []Step
	// Requests are asked one after the other; a batch implementation gets
	// them in one batch and must answer as if they ran one after the other.
	Requests []Request
	Want     []Answer
	// Skip lists the implementations that do not decide this case, each
	// with the reason (and where the case is decided instead).
	Skip map[Impl]string
}

// Skips reports why impl does not run c, "" when it does.
func (c Case) Skips(impl Impl) string { return c.Skip[impl] }

// Code is the voucher code of the i-th case: short, valid, distinct.
func Code(i int) string { return fmt.Sprintf("CF%02d", i) }

// OrderID is the orderId the i-th case's order o is asked with: orderIds
// are global, so each case has its own.
func OrderID(i int, o string) string { return Code(i) + "-" + o }

// CampaignCode is the k-th code of the i-th case's campaign.
func CampaignCode(i, k int) string { return fmt.Sprintf("CF%02dK%d", i, k) }

// OtherCode is the code of the i-th case's other voucher.
func OtherCode(i int) string { return fmt.Sprintf("CF%02dX", i) }

// Reasons shared by several cases.
const (
	eligibleFirst = "the service checks eligibility (Voucher.CheckEligible) before it asks the gate"
	oneVoucher    = "the fault suite's model covers one voucher, always eligible"
	perVoucher    = "the gate's keys are per voucher: the service checks an orderId across vouchers (Gate.ClaimOrder, Store.Order)"
	noVoucher     = "the service looks the voucher up (Store.Voucher) before it asks the gate"
	notSoldOut    = "the cache answers only for a voucher Redis found sold out"
	budgetCode    = "the service refuses a campaign's own code (VOUCHER_NOT_FOUND) before it asks the gate"
	campaignRule  = "the campaign rows test codes and their budget, not eligibility"
	noBudget      = "the fault suite's model counts uses, not money: its budget scenario checks the stores' money invariant (pgstore.Violations)"
	knownFirst    = "a known orderId is answered before eligibility: the service's path decides it (standardPath.ineligible, flashPath.knownOrder)"
	noWindows     = "the fault suite's model knows one occurrence of no windows: its window scenario checks each occurrence's held uses against windowLimit on the stores (pgstore.Violations)"
)

var (
	skipGate = map[Impl]string{Script: eligibleFirst, SoldOutCache: eligibleFirst, Model: oneVoucher}
	skipAll  = map[Impl]string{Script: noVoucher, SoldOutCache: noVoucher, Model: oneVoucher, Eligibility: noVoucher}
	// skipCampaign: the campaign rows run in the store's functions, in
	// reserve.lua and the sold-out cache (a flash campaign's codes are
	// gated under its budget's keys) and in the fault model.
	skipCampaign = map[Impl]string{Eligibility: campaignRule}
	// skipBoundKnown: a known orderId of a voucher with a customer and a
	// currency, asked so that eligibility alone would refuse it.
	skipBoundKnown = map[Impl]string{Script: eligibleFirst, SoldOutCache: eligibleFirst, Model: oneVoucher, Eligibility: knownFirst}
	// skipBudget: a request by the budget's own code.
	skipBudget = map[Impl]string{Script: budgetCode, SoldOutCache: budgetCode, Eligibility: campaignRule, Model: noVoucher}
	// skipMoney: the money budget rows; the fault model counts uses only
	// (its budget scenario checks the money invariant on the stores).
	skipMoney = map[Impl]string{Model: noBudget}
	// skipWindows: the rows of a quota per occurrence.
	skipWindows = map[Impl]string{Model: noWindows}
	// skipOutside: a request outside every window, an eligibility rule.
	skipOutside = map[Impl]string{Script: eligibleFirst, SoldOutCache: eligibleFirst, Model: noWindows}
)

// windowed is a voucher of total uses, perUser per customer and a quota of
// limit per occurrence of windows covering Now.
func windowed(total, perUser, limit int32) VoucherSpec {
	return VoucherSpec{TotalLimit: total, PerUserLimit: perUser, Windows: InWindow, WindowLimit: limit}
}

// earlier is a reservation taken in the occurrence before Now's.
func earlier(c string, o string) Step {
	return Step{Kind: StepReserve, Customer: c, Order: o, Earlier: true}
}

func reserve(c string, o string) Step { return Step{Kind: StepReserve, Customer: c, Order: o} }
func release(o string) Step           { return Step{Kind: StepRelease, Order: o} }
func confirm(o string) Step           { return Step{Kind: StepConfirm, Order: o} }
func req(c string, o string) Request  { return Request{Customer: c, Order: o} }

// reqIn is a request naming currency cur.
func reqIn(c, o, cur string) Request { return Request{Customer: c, Order: o, Currency: cur} }

// takenOff and replayOff are a use taken or replayed answering discount d.
func takenOff(d int64) Answer  { return Answer{Discount: &d} }
func replayOff(d int64) Answer { return Answer{Replay: true, Discount: &d} }

// percent is a percentage discount of bp basis points, capped at max (0:
// no cap).
func percent(bp int32, max int64) VoucherSpec {
	return VoucherSpec{TotalLimit: 10, PerUserLimit: 10, Discount: voucher.Discount{PercentBP: bp, MaxAmount: max}}
}

// The steps and requests of campaign cases, with code k.
func reserveK(c string, o string, k int) Step {
	return Step{Kind: StepReserve, Customer: c, Order: o, CodeIndex: k}
}
func reqK(c string, o string, k int) Request { return Request{Customer: c, Order: o, CodeIndex: k} }
func campaign(total, perUser int32) VoucherSpec {
	return VoucherSpec{TotalLimit: total, PerUserLimit: perUser, Campaign: true}
}

// money is a voucher of total uses, perUser per customer, discount d and a
// money budget of amount (clipping when clip).
func money(total, perUser int32, d voucher.Discount, amount int64, clip bool) VoucherSpec {
	return VoucherSpec{TotalLimit: total, PerUserLimit: perUser, Discount: d, Budget: voucher.Budget{Amount: amount, Clip: clip}}
}

// fixed and pct are discounts: an amount, a percentage in basis points.
func fixed(d int64) voucher.Discount { return voucher.Discount{Amount: d} }
func pct(bp int32) voucher.Discount  { return voucher.Discount{PercentBP: bp} }

// amountReq is request r with an order amount.
func amountReq(c string, o string, amount int64) Request {
	return Request{Customer: c, Order: o, Amount: amount}
}

var (
	taken      = Answer{}
	replay     = Answer{Replay: true}
	conflict   = Answer{Code: voucher.CodeOrderConflict}
	released   = Answer{Code: voucher.CodeOrderReleased}
	quota      = Answer{Code: voucher.CodeAlreadyUsed}
	codeUsed   = Answer{Code: voucher.CodeAlreadyUsed, Reason: voucher.ReasonCodeUsed}
	soldOut    = Answer{Code: voucher.CodeOutOfStock}
	heldOut    = Answer{Code: voucher.CodeHeldOut}
	overBudget = Answer{Code: voucher.CodeBudgetExceeded}
	// windowHeld and windowSold: the occurrence holds windowLimit uses,
	// some RESERVED, or every one CONFIRMED.
	windowHeld = Answer{Code: voucher.CodeHeldOut, Limit: voucher.LimitWindow}
	windowSold = Answer{Code: voucher.CodeOutOfStock, Limit: voucher.LimitWindow}
	outside    = Answer{Code: voucher.CodeNotEligible, Reason: voucher.ReasonOutsideWindow}

	currencyMismatch = Answer{Code: voucher.CodeNotEligible, Reason: voucher.ReasonCurrencyMismatch}
	customerMismatch = Answer{Code: voucher.CodeNotEligible, Reason: voucher.ReasonCustomerMismatch}
)

// Cases are the rule, one situation per row.
var Cases = []Case{
	{Name: "new order takes a use", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Requests: []Request{req("1", "o1")}, Want: []Answer{taken}},
	{Name: "replay of a held order", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1")},
		Requests: []Request{req("1", "o1")}, Want: []Answer{replay}},
	{Name: "replay of a confirmed order", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), confirm("o1")},
		Requests: []Request{req("1", "o1")}, Want: []Answer{replay}},
	{Name: "another customer's orderId", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1")},
		Requests: []Request{req("2", "o1")}, Want: []Answer{conflict}},
	{Name: "orderId used with another voucher", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{{Kind: StepReserve, Customer: "1", Order: "o1", OtherVoucher: true}},
		Requests: []Request{req("1", "o1")}, Want: []Answer{conflict},
		Skip: map[Impl]string{Script: perVoucher, SoldOutCache: perVoucher, Model: oneVoucher}},
	{Name: "released orderId", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), release("o1")},
		Requests: []Request{req("1", "o1")}, Want: []Answer{released}},
	{Name: "released orderId asked by another customer", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), release("o1")},
		Requests: []Request{req("2", "o1")}, Want: []Answer{conflict}},
	{Name: "quota full", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1")},
		Requests: []Request{req("1", "o2")}, Want: []Answer{quota}},
	{Name: "quota of two full", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 2},
		Before:   []Step{reserve("1", "o1"), reserve("1", "o2")},
		Requests: []Request{req("1", "o3"), req("2", "o4")}, Want: []Answer{quota, taken}},
	{Name: "a released use counts no more against the quota", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), release("o1")},
		Requests: []Request{req("1", "o2")}, Want: []Answer{taken}},
	{Name: "sold out: every use confirmed", Voucher: VoucherSpec{TotalLimit: 1, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), confirm("o1")},
		Requests: []Request{req("2", "o2")}, Want: []Answer{soldOut}},
	{Name: "held out: a use still RESERVED", Voucher: VoucherSpec{TotalLimit: 1, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1")},
		Requests: []Request{req("2", "o2")}, Want: []Answer{heldOut}},
	{Name: "quota full and sold out", Voucher: VoucherSpec{TotalLimit: 1, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), confirm("o1")},
		Requests: []Request{req("1", "o2")},
		// PL/pgSQL and the cache check stock first, reserve.lua the quota.
		Want: []Answer{{Code: voucher.CodeOutOfStock, Or: voucher.CodeAlreadyUsed}}},
	{Name: "replay while sold out", Voucher: VoucherSpec{TotalLimit: 1, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), confirm("o1")},
		Requests: []Request{req("1", "o1")}, Want: []Answer{replay}},
	{Name: "another customer's orderId while sold out", Voucher: VoucherSpec{TotalLimit: 1, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), confirm("o1")},
		Requests: []Request{req("2", "o1")}, Want: []Answer{conflict}},
	{Name: "released orderId while sold out", Voucher: VoucherSpec{TotalLimit: 1, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), release("o1"), reserve("2", "o2"), confirm("o2")},
		Requests: []Request{req("1", "o1"), req("3", "o3")}, Want: []Answer{released, soldOut}},
	{Name: "last use", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), confirm("o1")},
		Requests: []Request{req("2", "o2"), req("3", "o3")}, Want: []Answer{taken, heldOut}},
	{Name: "not started", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1, Window: NotStarted},
		Requests: []Request{req("1", "o1")}, Want: []Answer{{Code: voucher.CodeNotEligible, Reason: voucher.ReasonNotStarted}},
		Skip: skipGate},
	{Name: "ended", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1, Window: Ended},
		Requests: []Request{req("1", "o1")}, Want: []Answer{{Code: voucher.CodeNotEligible, Reason: voucher.ReasonExpired}},
		Skip: skipGate},
	{Name: "order amount too low", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1, MinOrderAmount: 1000},
		Requests: []Request{{Customer: "1", Order: "o1", Amount: 999}, {Customer: "1", Order: "o2", Amount: 1000}},
		Want:     []Answer{{Code: voucher.CodeNotEligible, Reason: voucher.ReasonOrderAmountTooLow}, taken},
		Skip:     skipGate},
	{Name: "ineligible, then the same orderId eligible", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1, MinOrderAmount: 1000},
		Requests: []Request{{Customer: "1", Order: "o1", Amount: 10}, {Customer: "1", Order: "o1", Amount: 5000}},
		Want:     []Answer{{Code: voucher.CodeNotEligible, Reason: voucher.ReasonOrderAmountTooLow}, taken},
		Skip:     skipGate},
	{Name: "disabled", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1, Disabled: true},
		Requests: []Request{req("1", "o1")}, Want: []Answer{{Code: voucher.CodeNotEligible, Reason: voucher.ReasonDisabled}},
		Skip: skipGate},
	{Name: "disabled before its window", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 1, Disabled: true, Window: NotStarted},
		Requests: []Request{req("1", "o1")}, Want: []Answer{{Code: voucher.CodeNotEligible, Reason: voucher.ReasonDisabled}},
		Skip: skipGate},
	{Name: "unknown voucher", Voucher: VoucherSpec{Missing: true},
		Requests: []Request{req("1", "o1")}, Want: []Answer{{Code: voucher.CodeVoucherNotFound}},
		Skip: skipAll},
	{Name: "same customer twice", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 1},
		Requests: []Request{req("1", "o1"), req("1", "o2")}, Want: []Answer{taken, quota}},
	{Name: "same orderId twice", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 1},
		Requests: []Request{req("1", "o1"), req("1", "o1")}, Want: []Answer{taken, replay}},
	{Name: "same orderId, two customers", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 1},
		Requests: []Request{req("1", "o1"), req("2", "o1")}, Want: []Answer{taken, conflict}},
	{Name: "more requests than uses", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 2},
		Requests: []Request{req("1", "o1"), req("2", "o2"), req("1", "o3"), req("2", "o2")},
		Want:     []Answer{taken, taken, heldOut, replay}},
	{Name: "quota full, released, taken again in one go", Voucher: VoucherSpec{TotalLimit: 3, PerUserLimit: 1},
		Before:   []Step{reserve("1", "o1"), release("o1"), reserve("2", "o2")},
		Requests: []Request{req("1", "o3"), req("1", "o4"), req("2", "o2")}, Want: []Answer{taken, quota, replay}},
	{Name: "a fixed discount is at most the order amount", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5},
		Requests: []Request{{Customer: "1", Order: "o1", Amount: 50}, {Customer: "1", Order: "o2"},
			{Customer: "1", Order: "o3", Amount: 100_000}},
		Want: []Answer{takenOff(50), takenOff(100_000), takenOff(100_000)}},
	{Name: "a percentage of the order amount", Voucher: percent(1250, 0),
		Requests: []Request{{Customer: "1", Order: "o1"}, {Customer: "2", Order: "o2", Amount: 1_000_000_000_000_000}},
		Want:     []Answer{takenOff(31_250), takenOff(125_000_000_000_000)}},
	{Name: "a percentage rounds down to the minor unit", Voucher: percent(3333, 0),
		Requests: []Request{{Customer: "1", Order: "o1", Amount: 1}, {Customer: "1", Order: "o2", Amount: 299},
			{Customer: "1", Order: "o3", Amount: 300}, {Customer: "1", Order: "o4", Amount: 999_999_999_999_999}},
		Want: []Answer{takenOff(0), takenOff(99), takenOff(99), takenOff(333_299_999_999_999)}},
	{Name: "100% is the order amount", Voucher: percent(10_000, 0),
		Requests: []Request{{Customer: "1", Order: "o1", Amount: 1}, {Customer: "1", Order: "o2", Amount: 1_000_000_000_000_000}},
		Want:     []Answer{takenOff(1), takenOff(1_000_000_000_000_000)}},
	{Name: "a percentage is capped", Voucher: percent(2000, 40_000),
		Requests: []Request{{Customer: "1", Order: "o1", Amount: 199_995}, {Customer: "1", Order: "o2", Amount: 200_000},
			{Customer: "1", Order: "o3", Amount: 200_005}, {Customer: "1", Order: "o4"}},
		Want: []Answer{takenOff(39_999), takenOff(40_000), takenOff(40_000), takenOff(40_000)}},
	{Name: "a replay answers the discount of the order that took the use", Voucher: percent(1000, 0),
		Before:   []Step{reserve("1", "o1")},
		Requests: []Request{{Customer: "1", Order: "o1", Amount: 10}, {Customer: "1", Order: "o2", Amount: 10}},
		Want:     []Answer{replayOff(25_000), takenOff(1)}},

	// Campaigns: each code at most once, one budget and one per-customer
	// limit across the codes.
	{Name: "campaign: a code takes a use of the budget", Voucher: campaign(2, 1),
		Requests: []Request{reqK("1", "o1", 0)}, Want: []Answer{taken}, Skip: skipCampaign},
	{Name: "campaign: replay with the same code", Voucher: campaign(2, 1),
		Before:   []Step{reserveK("1", "o1", 0)},
		Requests: []Request{reqK("1", "o1", 0)}, Want: []Answer{replay}, Skip: skipCampaign},
	{Name: "campaign: orderId asked with another code", Voucher: campaign(2, 2),
		Before:   []Step{reserveK("1", "o1", 0)},
		Requests: []Request{reqK("1", "o1", 1)}, Want: []Answer{conflict}, Skip: skipCampaign},
	{Name: "campaign: code held by another order", Voucher: campaign(5, 5),
		Before:   []Step{reserveK("1", "o1", 0)},
		Requests: []Request{reqK("2", "o2", 0), reqK("1", "o3", 0)}, Want: []Answer{codeUsed, codeUsed}, Skip: skipCampaign},
	{Name: "campaign: code of a confirmed order", Voucher: campaign(5, 5),
		Before:   []Step{reserveK("1", "o1", 0), confirm("o1")},
		Requests: []Request{reqK("2", "o2", 0)}, Want: []Answer{codeUsed}, Skip: skipCampaign},
	{Name: "campaign: a released code is free again", Voucher: campaign(5, 1),
		Before:   []Step{reserveK("1", "o1", 0), release("o1")},
		Requests: []Request{reqK("2", "o2", 0)}, Want: []Answer{taken}, Skip: skipCampaign},
	{Name: "campaign: per-customer limit across codes", Voucher: campaign(5, 1),
		Before:   []Step{reserveK("1", "o1", 0)},
		Requests: []Request{reqK("1", "o2", 1), reqK("2", "o3", 1)}, Want: []Answer{quota, taken}, Skip: skipCampaign},
	{Name: "campaign: budget across codes, confirmed", Voucher: campaign(1, 5),
		Before:   []Step{reserveK("1", "o1", 0), confirm("o1")},
		Requests: []Request{reqK("2", "o2", 1)}, Want: []Answer{soldOut}, Skip: skipCampaign},
	{Name: "campaign: budget across codes, held", Voucher: campaign(2, 5),
		Before:   []Step{reserveK("1", "o1", 0)},
		Requests: []Request{reqK("2", "o2", 1), reqK("3", "o3", 2)}, Want: []Answer{taken, heldOut}, Skip: skipCampaign},
	{Name: "campaign: code used and budget spent", Voucher: campaign(1, 5),
		Before:   []Step{reserveK("1", "o1", 0), confirm("o1")},
		Requests: []Request{reqK("2", "o2", 0)}, Want: []Answer{codeUsed}, Skip: skipCampaign},
	{Name: "campaign: one code, two orders in one go", Voucher: campaign(5, 5),
		Requests: []Request{reqK("1", "o1", 0), reqK("2", "o2", 0), reqK("1", "o1", 0)},
		Want:     []Answer{taken, codeUsed, replay}, Skip: skipCampaign},
	{Name: "campaign: a code bound to one customer", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5, Campaign: true,
		CodeCustomers: map[int]string{0: "anna@example.com"}},
		Requests: []Request{reqK("bob@example.com", "o1", 0), reqK("bob@example.com", "o2", 1), reqK("anna@example.com", "o3", 0)},
		Want:     []Answer{customerMismatch, taken, taken},
		Skip:     map[Impl]string{Script: eligibleFirst, SoldOutCache: eligibleFirst, Model: oneVoucher, Eligibility: campaignRule}},
	{Name: "campaign: the budget's own code", Voucher: campaign(5, 5),
		Requests: []Request{{Customer: "1", Order: "o1", Budget: true}}, Want: []Answer{{Code: voucher.CodeVoucherNotFound}},
		Skip: skipBudget},
	{Name: "string customer ids: quota per string", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 1},
		Before:   []Step{reserve("cus_A1:x@shop.example+1", "o1")},
		Requests: []Request{req("cus_A1:x@shop.example+1", "o2"), req("cus_a1:x@shop.example+1", "o3"), req("cus_A1:x@shop.example+1", "o1")},
		Want:     []Answer{quota, taken, replay}},
	{Name: "digit strings are compared as strings", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 1},
		Before:   []Step{reserve("7", "o1")},
		Requests: []Request{req("007", "o2"), req("7", "o3"), req("007", "o1")},
		Want:     []Answer{taken, quota, conflict}},

	// A voucher's currency and the one customer it serves.
	{Name: "currency: the voucher's currency takes a use", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5, Currency: "EUR"},
		Requests: []Request{reqIn("1", "o1", "EUR")}, Want: []Answer{taken}},
	{Name: "currency: another currency, or none, is refused", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5, Currency: "EUR"},
		Requests: []Request{reqIn("1", "o1", "USD"), req("1", "o2"), reqIn("1", "o1", "EUR")},
		Want:     []Answer{currencyMismatch, currencyMismatch, taken}, Skip: skipGate},
	{Name: "currency: a voucher without one takes any, or none", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5},
		Requests: []Request{reqIn("1", "o1", "USD"), req("2", "o2")}, Want: []Answer{taken, taken}},
	{Name: "currency: refused before the order amount", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5, Currency: "EUR", MinOrderAmount: 1000},
		Requests: []Request{{Customer: "1", Order: "o1", Amount: 10, Currency: "JPY"}, {Customer: "1", Order: "o2", Amount: 10, Currency: "EUR"}},
		Want:     []Answer{currencyMismatch, {Code: voucher.CodeNotEligible, Reason: voucher.ReasonOrderAmountTooLow}}, Skip: skipGate},
	{Name: "customer: the bound customer takes a use", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5, Customer: "anna@example.com"},
		Requests: []Request{req("anna@example.com", "o1")}, Want: []Answer{taken}},
	{Name: "customer: any other customer is refused", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5, Customer: "anna@example.com"},
		Requests: []Request{req("bob@example.com", "o1"), req("Anna@example.com", "o2"), req("anna@example.com", "o1")},
		Want:     []Answer{customerMismatch, customerMismatch, taken}, Skip: skipGate},
	{Name: "customer and currency: the customer is told first", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5, Customer: "7", Currency: "EUR"},
		Requests: []Request{reqIn("8", "o1", "USD"), reqIn("7", "o2", "USD"), reqIn("7", "o3", "EUR")},
		Want:     []Answer{customerMismatch, currencyMismatch, taken}, Skip: skipGate},
	{Name: "bound: a known orderId is answered before the customer and the currency", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5, Customer: "7", Currency: "EUR"},
		Before:   []Step{reserve("7", "o1")},
		Requests: []Request{reqIn("7", "o1", "USD"), reqIn("8", "o1", "EUR")},
		Want:     []Answer{replay, conflict}, Skip: skipBoundKnown},
	// Money budgets: the held discounts together at most budgetAmount.
	{Name: "budget: three fixed discounts fit, the fourth does not", Voucher: money(10, 10, fixed(3_000), 10_000, false),
		Requests: []Request{req("1", "o1"), req("2", "o2"), req("3", "o3"), req("4", "o4")},
		Want:     []Answer{takenOff(3_000), takenOff(3_000), takenOff(3_000), overBudget}, Skip: skipMoney},
	{Name: "budget: a release gives the stored discount back", Voucher: money(10, 10, fixed(3_000), 10_000, false),
		Before:   []Step{reserve("1", "o1"), reserve("2", "o2"), reserve("3", "o3"), release("o1")},
		Requests: []Request{req("4", "o4"), req("5", "o5")}, Want: []Answer{takenOff(3_000), overBudget}, Skip: skipMoney},
	{Name: "budget: a confirmed discount still counts", Voucher: money(10, 10, fixed(3_000), 6_000, false),
		Before:   []Step{reserve("1", "o1"), confirm("o1"), reserve("2", "o2")},
		Requests: []Request{req("3", "o3")}, Want: []Answer{overBudget}, Skip: skipMoney},
	{Name: "budget: a percentage, a smaller order still fits", Voucher: money(10, 10, pct(1_000), 5_000, false),
		Requests: []Request{amountReq("1", "o1", 30_000), amountReq("1", "o2", 30_000), amountReq("1", "o3", 20_000)},
		Want:     []Answer{takenOff(3_000), overBudget, takenOff(2_000)}, Skip: skipMoney},
	{Name: "budget: clip gives what is left, then refuses", Voucher: money(10, 10, pct(1_000), 5_000, true),
		Requests: []Request{amountReq("1", "o1", 30_000), amountReq("1", "o2", 30_000), amountReq("1", "o3", 20_000)},
		Want:     []Answer{takenOff(3_000), takenOff(2_000), overBudget}, Skip: skipMoney},
	{Name: "budget: a replay answers the clipped discount", Voucher: money(10, 10, pct(1_000), 5_000, true),
		Before:   []Step{reserve("1", "o1")},
		Requests: []Request{amountReq("1", "o1", 10), amountReq("1", "o2", 10)}, Want: []Answer{replayOff(5_000), overBudget},
		Skip: skipMoney},
	{Name: "budget: an exhausted budget refuses a discount of 0", Voucher: money(10, 10, pct(1_000), 25_000, false),
		Before:   []Step{reserve("1", "o1")},
		Requests: []Request{amountReq("2", "o2", 5)}, Want: []Answer{overBudget}, Skip: skipMoney},
	{Name: "budget and total: the uses run out first", Voucher: money(2, 10, fixed(1_000), 1_000_000, false),
		Requests: []Request{req("1", "o1"), req("2", "o2"), req("3", "o3")},
		Want:     []Answer{takenOff(1_000), takenOff(1_000), heldOut}, Skip: skipMoney},
	{Name: "budget and total: the budget runs out first", Voucher: money(5, 10, fixed(1_000), 2_000, false),
		Requests: []Request{req("1", "o1"), req("2", "o2"), req("3", "o3"), req("2", "o2")},
		Want:     []Answer{takenOff(1_000), takenOff(1_000), overBudget, replayOff(1_000)}, Skip: skipMoney},
	{Name: "budget and total both spent", Voucher: money(2, 10, fixed(1_000), 2_000, false),
		Before:   []Step{reserve("1", "o1"), confirm("o1"), reserve("2", "o2"), confirm("o2")},
		Requests: []Request{req("3", "o3")}, Want: []Answer{soldOut}, Skip: skipMoney},
	{Name: "budget and perUser: the quota binds while money is left", Voucher: money(10, 1, fixed(1_000), 5_000, false),
		Before:   []Step{reserve("1", "o1")},
		Requests: []Request{req("1", "o2"), req("2", "o3")}, Want: []Answer{quota, takenOff(1_000)}, Skip: skipMoney},
	{Name: "budget and perUser both spent", Voucher: money(10, 1, fixed(1_000), 1_500, false),
		Before: []Step{reserve("1", "o1")},
		// PL/pgSQL fits the budget before it counts the customer,
		// reserve.lua counts the customer first; both take nothing.
		Requests: []Request{req("1", "o2"), req("2", "o3")},
		Want:     []Answer{{Code: voucher.CodeBudgetExceeded, Or: voucher.CodeAlreadyUsed}, overBudget}, Skip: skipMoney},
	{Name: "budget of a campaign across its codes", Voucher: VoucherSpec{TotalLimit: 5, PerUserLimit: 5, Campaign: true,
		Discount: fixed(1_000), Budget: voucher.Budget{Amount: 2_000}},
		Requests: []Request{reqK("1", "o1", 0), reqK("2", "o2", 1), reqK("3", "o3", 2)},
		Want:     []Answer{takenOff(1_000), takenOff(1_000), overBudget},
		Skip:     map[Impl]string{Model: noBudget, Eligibility: campaignRule}},
	// Recurring windows: the uses taken in one occurrence at most
	// windowLimit together; a use counts in the occurrence it was taken in.
	{Name: "window: the occurrence's quota binds", Voucher: windowed(10, 10, 2),
		Requests: []Request{req("1", "o1"), req("2", "o2"), req("3", "o3")}, Want: []Answer{taken, taken, windowHeld},
		Skip: skipWindows},
	{Name: "window: a replay in a full occurrence", Voucher: windowed(10, 10, 2),
		Before:   []Step{reserve("1", "o1"), reserve("2", "o2")},
		Requests: []Request{req("1", "o1"), req("3", "o3")}, Want: []Answer{replay, windowHeld}, Skip: skipWindows},
	{Name: "window: confirmed uses count, OUT_OF_STOCK when every one is", Voucher: windowed(10, 10, 2),
		Before:   []Step{reserve("1", "o1"), confirm("o1"), reserve("2", "o2"), confirm("o2")},
		Requests: []Request{req("3", "o3")}, Want: []Answer{windowSold}, Skip: skipWindows},
	{Name: "window: a release gives the use back to its occurrence", Voucher: windowed(10, 10, 2),
		Before:   []Step{reserve("1", "o1"), reserve("2", "o2"), release("o1")},
		Requests: []Request{req("3", "o3"), req("4", "o4")}, Want: []Answer{taken, windowHeld}, Skip: skipWindows},
	{Name: "window: the previous occurrence's uses do not count in this one", Voucher: windowed(10, 10, 2),
		Before:   []Step{earlier("1", "o1"), earlier("2", "o2")},
		Requests: []Request{req("3", "o3"), req("4", "o4"), req("5", "o5")}, Want: []Answer{taken, taken, windowHeld},
		Skip: skipWindows},
	{Name: "window: a use released after its occurrence goes back to that one", Voucher: windowed(10, 10, 2),
		Before:   []Step{earlier("1", "o1"), earlier("2", "o2"), reserve("3", "o3"), reserve("4", "o4"), release("o1")},
		Requests: []Request{req("5", "o5")}, Want: []Answer{windowHeld}, Skip: skipWindows},
	{Name: "window: outside every window", Voucher: VoucherSpec{TotalLimit: 10, PerUserLimit: 10, Windows: OutsideWindows, WindowLimit: 5},
		Requests: []Request{req("1", "o1")}, Want: []Answer{outside}, Skip: skipOutside},
	{Name: "window and total: the uses run out first", Voucher: windowed(2, 10, 5),
		Requests: []Request{req("1", "o1"), req("2", "o2"), req("3", "o3")},
		Want:     []Answer{taken, taken, {Code: voucher.CodeHeldOut, Limit: voucher.LimitTotal}}, Skip: skipWindows},
	{Name: "window and perUser: the quota binds while the window has room", Voucher: windowed(10, 1, 5),
		Before:   []Step{reserve("1", "o1")},
		Requests: []Request{req("1", "o2"), req("2", "o3")}, Want: []Answer{quota, taken}, Skip: skipWindows},
	{Name: "window and perUser both spent", Voucher: windowed(10, 1, 1),
		Before: []Step{reserve("1", "o1")},
		// PL/pgSQL fits the window before it counts the customer,
		// reserve.lua counts the customer first; both take nothing.
		Requests: []Request{req("1", "o2"), req("2", "o3")},
		Want:     []Answer{{Code: voucher.CodeHeldOut, Limit: voucher.LimitWindow, Or: voucher.CodeAlreadyUsed}, windowHeld},
		Skip:     skipWindows},
	{Name: "total, budget, window and perUser: the window binds first", Voucher: VoucherSpec{TotalLimit: 10, PerUserLimit: 2,
		Discount: fixed(1_000), Budget: voucher.Budget{Amount: 3_000}, Windows: InWindow, WindowLimit: 2},
		Requests: []Request{req("1", "o1"), req("1", "o2"), req("1", "o3"), req("2", "o4")},
		Want: []Answer{takenOff(1_000), takenOff(1_000),
			{Code: voucher.CodeHeldOut, Limit: voucher.LimitWindow, Or: voucher.CodeAlreadyUsed}, windowHeld},
		Skip: skipWindows},
	{Name: "total, budget, window and perUser: the budget binds first", Voucher: VoucherSpec{TotalLimit: 10, PerUserLimit: 2,
		Discount: fixed(1_000), Budget: voucher.Budget{Amount: 2_000}, Windows: InWindow, WindowLimit: 5},
		Before:   []Step{earlier("1", "o1")},
		Requests: []Request{req("2", "o2"), req("3", "o3"), req("1", "o4")},
		Want:     []Answer{takenOff(1_000), overBudget, overBudget}, Skip: skipWindows},
	{Name: "total, budget, window and perUser: the uses bind first", Voucher: VoucherSpec{TotalLimit: 2, PerUserLimit: 3,
		Discount: fixed(1_000), Budget: voucher.Budget{Amount: 5_000}, Windows: InWindow, WindowLimit: 5},
		Before:   []Step{earlier("1", "o1"), confirm("o1")},
		Requests: []Request{req("1", "o2"), req("1", "o3")},
		Want:     []Answer{takenOff(1_000), {Code: voucher.CodeHeldOut, Limit: voucher.LimitTotal}}, Skip: skipWindows},
}
