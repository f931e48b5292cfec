package faults

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// VoucherSpec is what the model needs to know of the voucher under test.
// For a campaign Code is the campaign id (its budget's voucher code, which
// the rows carry) and Codes are its codes, which the operations name.
type VoucherSpec struct {
	Code         string
	TotalLimit   int
	PerUserLimit int
	Codes        []string `json:",omitempty"`
}

// Campaign reports whether the spec is a campaign's.
func (s VoucherSpec) Campaign() bool { return len(s.Codes) > 0 }

// covers reports whether an operation naming code is on the voucher (or
// campaign) under test.
func (s VoucherSpec) covers(code string) bool {
	return code == s.Code || slices.Contains(s.Codes, code)
}

// Order states in the model.
const (
	orderAbsent byte = iota
	orderReserved
	orderConfirmed
	orderReleased
)

// modelState is one voucher's state: the uses left, each customer's held
// count (one byte per customer index) and each order's state and owner (two
// bytes per order index). For a campaign (Model.nCode > 0) codes holds, per
// code index, 1 while a live order holds the code (0: free), and ocode, per
// order index, the index+1 of the code it was made with. Strings make it
// immutable and comparable with ==, which porcupine's Step and cache need.
type modelState struct {
	remaining int32
	cust      string
	orders    string
	codes     string
	ocode     string
}

func setByte(s string, i int, v byte) string {
	b := []byte(s)
	b[i] = v
	return string(b)
}

func (s modelState) orderState(i int) (st byte, owner int) {
	return s.orders[2*i], int(s.orders[2*i+1])
}

func (s modelState) withOrder(i int, st byte, owner int) string {
	b := []byte(s.orders)
	b[2*i], b[2*i+1] = st, byte(owner) //nolint:gosec // G115: NewModel keeps at most 255 customers
	return string(b)
}

func (s modelState) withCust(i, delta int) string {
	b := []byte(s.cust)
	b[i] = byte(int(b[i]) + delta) //nolint:gosec // G115: a held count stays within 0..PerUserLimit, at most 255 (NewModel)
	return string(b)
}

// modelInput is an operation as the model sees it, with dense indexes.
type modelInput struct {
	kind  Kind
	cust  int // customer index (reserve) or -1
	order int // order index
	// code is, for a reserve of a campaign, the index+1 of the code
	// presented; 0 for a voucher.
	code int
	// replaces is, for a reserve that names the order it replaces, that
	// order's index+1; 0 for a plain reserve.
	replaces int
	op       *Op // the recorded attempt, for messages
}

// modelOutput is an attempt's outcome.
type modelOutput struct{ outcome Outcome }

// Model is the sequential specification of one voucher: reserve
// takes a use when the orderId is new, the customer is under perUserLimit
// and a use is left; a known orderId is replayed (ok), refused as
// ORDER_CONFLICT (another customer) or ORDER_RELEASED; release gives the
// use back once; confirm keeps it.
//
// Unknown outcomes are accepted and apply the operation (the history gives
// them an open-ended return, so porcupine may also place them after
// everything, which is "no effect"); Unavailable (503) is accepted and
// changes nothing, as the contract promises.
//
// A reserve that names the order it replaces (replacesOrderId) is
// answered as a reserve when its orderId is known; otherwise, when the
// replaced order is the same customer's RESERVED hold, the replaced order
// becomes released and the new one reserved in one step, with the uses
// left and the customer's count untouched (no quota or stock check); any
// other replaced order is REPLACED_ORDER_NOT_HELD, without effect.
//
// With strict false (the flash modes) OUT_OF_STOCK and ALREADY_USED are
// accepted in any state, without effect: the Redis gate may refuse a use
// that the model would grant (a hold whose write failed and is not yet
// reconciled, the per-instance sold-out cache), which the invariants (docs/rules.md) allow as
// temporary undersell. So is REPLACED_ORDER_NOT_HELD: the gate replaces
// only a hold it has marked durable, and a hold whose mark failed (Redis
// trouble after the 201) stays unmarked until reconciliation; the refusal
// leaves the customer their hold. Everything that hands out a use or
// answers for an orderId stays exact.
//
// A campaign (nCode > 0) adds its codes: a reserve presents one, a known
// orderId asked with another code is ORDER_CONFLICT, a code held by a live
// order is ALREADY_USED (checked before stock and quota, as
// voucherd_reserve does), and a release frees the order's code. A
// replacement on a campaign (voucherd_replace, replace.lua) presents a code
// too: the replaced order must be the customer's RESERVED hold on the
// campaign, with any of its codes (else REPLACED_ORDER_NOT_HELD, checked
// first); then a code held by a live order other than the replaced one is
// ALREADY_USED (CODE_USED); else the replaced order's code comes free and
// the new order holds the code presented (it may be the same code).
type Model struct {
	spec   VoucherSpec
	strict bool
	nCust  int
	nOrder int
	nCode  int      // codes of a campaign; 0 for a voucher
	custID []string // index -> customerId
	order  []string // index -> orderId
}

// Final tells what PostgreSQL holds for an order once the run is over and
// every write has landed: its row, if any. It lets the checker drop
// unknown attempts that provably had no lasting effect.
type Final func(orderID string) (Row, bool)

// NewModel builds the model of spec and the porcupine history of ops:
// the attempts of one logical operation (Seq) become one operation when
// they ended in success; otherwise their unknown attempts become one
// open-ended operation, unless final proves they did nothing (see
// dropUnknown); 503s are left out (they take nothing and tell nothing).
func NewModel(spec VoucherSpec, strict bool, ops []Op, final Final) (*Model, []porcupine.Operation, error) {
	m := &Model{spec: spec, strict: strict, nCode: len(spec.Codes)}
	custIdx := map[string]int{}
	orderIdx := map[string]int{}
	codeIdx := map[string]int{}
	for i, c := range spec.Codes {
		codeIdx[c] = i + 1
	}
	orderIndex := func(id string) int {
		oi, ok := orderIdx[id]
		if !ok {
			oi = len(m.order)
			orderIdx[id] = oi
			m.order = append(m.order, id)
		}
		return oi
	}
	var hist []porcupine.Operation
	for _, chain := range chains(spec, ops) {
		last := chain[len(chain)-1]
		if last.Return < 0 {
			return nil, nil, fmt.Errorf("op %v never finished", *last)
		}
		oi := orderIndex(last.OrderID)
		ci, code, replaces := -1, 0, 0
		if last.Kind == Reserve {
			var ok bool
			if ci, ok = custIdx[last.Customer]; !ok {
				ci = len(m.custID)
				custIdx[last.Customer] = ci
				m.custID = append(m.custID, last.Customer)
			}
			if spec.Campaign() {
				if code = codeIdx[last.Voucher]; code == 0 {
					return nil, nil, fmt.Errorf("op %v names no code of the campaign", *last)
				}
			}
			if last.Replaces != "" {
				replaces = orderIndex(last.Replaces) + 1
			}
		}
		add := func(op *Op, call, ret int64, out Outcome) {
			hist = append(hist, porcupine.Operation{
				ClientId: op.Client, Input: modelInput{kind: op.Kind, cust: ci, order: oi, code: code, replaces: replaces, op: op},
				Output: modelOutput{out}, Call: call, Return: ret,
			})
		}
		if last.Outcome == OK {
			// A chain that ended in success took effect once, somewhere
			// between its first attempt that may have acted and its end:
			// earlier attempts' effects and the final one's are the same
			// effect, and any of them coming later is a replay.
			call := last.Call
			for _, op := range chain {
				if op.Outcome == Unknown && op.Call < call {
					call = op.Call
				}
			}
			add(last, call, last.Return, OK)
			continue
		}
		// The unknown attempts of one chain are one open-ended operation
		// from the earliest of them: they are the same request, so at most
		// one of them acted, at some moment after that call (the others
		// replayed it or were refused, which changes nothing).
		var unknown *Op
		for _, op := range chain {
			switch op.Outcome {
			case Unavailable:
				// Takes nothing and answers nothing about the state.
			case Unknown:
				if unknown == nil && !dropUnknown(op, final, spec.Campaign()) {
					unknown = op
				}
			default:
				add(op, op.Call, op.Return, op.Outcome)
			}
		}
		if unknown != nil {
			add(unknown, unknown.Call, releasedBy(chain, unknown.Call), Unknown)
		}
	}
	hist = append(hist, serviceReleases(spec, ops, final, orderIdx)...)
	if len(m.custID) > 255 {
		return nil, nil, fmt.Errorf("the model keeps owners in a byte: %d customers is too many", len(m.custID))
	}
	if len(spec.Codes) > 255 {
		return nil, nil, fmt.Errorf("the model keeps code indexes in a byte: %d codes is too many", len(spec.Codes))
	}
	if spec.TotalLimit > math.MaxInt32 {
		return nil, nil, fmt.Errorf("the model keeps the uses left in an int32: totalLimit %d is too large", spec.TotalLimit)
	}
	if spec.PerUserLimit > 255 {
		return nil, nil, fmt.Errorf("the model keeps per-customer counts in a byte: perUserLimit %d is too large", spec.PerUserLimit)
	}
	m.nCust, m.nOrder = len(m.custID), len(m.order)
	return m, hist, nil
}

// releasedBy bounds an open-ended operation on an order: whatever it did,
// it did before the first ORDER_RELEASED answer for the order that was
// asked after its call. That answer means the order is released for good
// (a RELEASED row, or the gate's released marker from one), and an attempt
// acting later meets the release and changes nothing. Without such an
// answer the operation stays open-ended (math.MaxInt64).
func releasedBy(ops []*Op, after int64) int64 {
	end := int64(math.MaxInt64)
	for _, op := range ops {
		if op.Kind == Reserve && op.Outcome == OrderReleased && op.Call > after && op.Return < end {
			end = op.Return
		}
	}
	return end
}

// serviceReleases adds the releases the service made on its own: in Kafka
// mode an order whose reservation outcome stayed unknown and whose event
// had not reached PostgreSQL long after is fenced with a RELEASED row
// (docs/faults.md, finding 8), so its final row is RELEASED though no client
// released it. Each becomes an open-ended release from the order's first
// reservation attempt on. CheckDatabase decides whether such a row is
// allowed at all.
func serviceReleases(spec VoucherSpec, ops []Op, final Final, orderIdx map[string]int) []porcupine.Operation {
	if final == nil {
		return nil
	}
	firstCall := map[string]int64{}
	released := map[string]bool{}
	byOrder := map[string][]*Op{}
	for i := range ops {
		op := &ops[i]
		if !spec.covers(op.Voucher) || op.Outcome == NotSent {
			continue
		}
		byOrder[op.OrderID] = append(byOrder[op.OrderID], op)
		switch op.Kind {
		case Release:
			// A release that failed (404 before the row existed, 503)
			// does not explain the row.
			if op.Outcome == OK || op.Outcome == Unknown {
				released[op.OrderID] = true
			}
		case Reserve:
			// A replacement that named the order (answered or not)
			// explains its RELEASED row: the model releases it there.
			if op.Replaces != "" && (op.Outcome == OK || op.Outcome == Unknown) {
				released[op.Replaces] = true
			}
			if c, ok := firstCall[op.OrderID]; !ok || op.Call < c {
				firstCall[op.OrderID] = op.Call
			}
		}
	}
	var out []porcupine.Operation
	for _, id := range sortedKeys(firstCall) {
		row, ok := final(id)
		if !ok || row.Status != "RELEASED" || released[id] {
			continue
		}
		op := &Op{ID: -1, Client: -1, Kind: Release, Voucher: spec.Code, Customer: row.Customer, OrderID: id,
			Call: firstCall[id], Return: -1, Outcome: Unknown, Err: "released by the service (fence)"}
		out = append(out, porcupine.Operation{
			ClientId: op.Client, Input: modelInput{kind: Release, cust: -1, order: orderIdx[id], op: op},
			Output: modelOutput{Unknown}, Call: op.Call, Return: releasedBy(byOrder[id], op.Call),
		})
	}
	return out
}

// dropUnknown reports whether final proves that an unknown attempt left
// no effect, so that the history need not carry an operation that may act
// at any later moment (each of those multiplies porcupine's search).
//
// A use is only ever durable as a row: a reservation whose order has no
// row of its customer at the end took nothing that lasted (in the flash
// modes it may have held a Redis use for a while; that only refuses other
// requests, which the flash model accepts anyway, and a replay of it would
// have written the row); on a campaign, nor did one that presented another
// code than the row's. Likewise a release of an order whose row is not
// RELEASED, and a confirm of one whose row is still RESERVED, did nothing.
func dropUnknown(op *Op, final Final, campaign bool) bool {
	if final == nil {
		return false
	}
	row, ok := final(op.OrderID)
	switch op.Kind {
	case Reserve:
		return !ok || row.Customer != op.Customer || campaign && row.Code != op.Voucher
	case Release:
		return !ok || row.Status != "RELEASED"
	case Confirm:
		return !ok || row.Status == "RESERVED"
	}
	return false
}

// chains groups the attempts on the voucher (or campaign) under test by
// logical operation (Seq), in invocation order, leaving out attempts that
// were never sent.
func chains(spec VoucherSpec, ops []Op) [][]*Op {
	var out [][]*Op
	bySeq := map[int]int{}
	for i := range ops {
		op := &ops[i]
		if !spec.covers(op.Voucher) || op.Outcome == NotSent {
			continue
		}
		if op.Seq == 0 {
			out = append(out, []*Op{op})
			continue
		}
		j, ok := bySeq[op.Seq]
		if !ok {
			j = len(out)
			bySeq[op.Seq] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], op)
	}
	for _, c := range out {
		sort.SliceStable(c, func(i, j int) bool { return c[i].Call < c[j].Call })
	}
	return out
}

func (m *Model) init() modelState {
	s := modelState{
		remaining: int32(m.spec.TotalLimit), //nolint:gosec // G115: NewModel keeps TotalLimit within an int32
		cust:      strings.Repeat("\x00", m.nCust),
		orders:    strings.Repeat("\x00", 2*m.nOrder),
	}
	if m.nCode > 0 {
		s.codes, s.ocode = strings.Repeat("\x00", m.nCode), strings.Repeat("\x00", m.nOrder)
	}
	return s
}

// expectReserve returns what a reserve in state s must answer and the
// state after it. alt is a second acceptable refusal when both limits
// bind (PostgreSQL checks stock first, the Redis script the quota first).
func (m *Model) expectReserve(s modelState, in modelInput) (want, alt Outcome, next modelState) {
	st, owner := s.orderState(in.order)
	if st != orderAbsent {
		switch {
		case owner != in.cust || m.nCode > 0 && int(s.ocode[in.order]) != in.code:
			return OrderConflict, "", s
		case st == orderReleased:
			return OrderReleased, "", s
		}
		return OK, "", s
	}
	if in.replaces > 0 {
		return m.expectReplace(s, in)
	}
	if in.code > 0 && s.codes[in.code-1] != 0 {
		return AlreadyUsed, "", s
	}
	quotaFull := int(s.cust[in.cust]) >= m.spec.PerUserLimit
	soldOut := s.remaining <= 0
	switch {
	case quotaFull && soldOut:
		return OutOfStock, AlreadyUsed, s
	case quotaFull:
		return AlreadyUsed, "", s
	case soldOut:
		return OutOfStock, "", s
	}
	next = modelState{
		remaining: s.remaining - 1,
		cust:      s.withCust(in.cust, +1),
		orders:    s.withOrder(in.order, orderReserved, in.cust),
		codes:     s.codes,
		ocode:     s.ocode,
	}
	if in.code > 0 {
		next.codes = setByte(s.codes, in.code-1, 1)
		next.ocode = setByte(s.ocode, in.order, byte(in.code)) //nolint:gosec // G115: NewModel keeps at most 255 codes
	}
	return OK, "", next
}

// expectReplace is expectReserve for a new orderId that names the order it
// replaces. On a campaign the replaced order's code is freed and the
// presented one taken in the same step; a code held by another live order
// than the replaced one is ALREADY_USED, checked after the replaced order
// (as voucherd_replace and replace.lua do).
func (m *Model) expectReplace(s modelState, in modelInput) (want, alt Outcome, next modelState) {
	old := in.replaces - 1
	if st, owner := s.orderState(old); st != orderReserved || owner != in.cust {
		return ReplacedOrderNotHeld, "", s
	}
	if in.code > 0 && s.codes[in.code-1] != 0 && int(s.ocode[old]) != in.code {
		return AlreadyUsed, "", s
	}
	next = s
	next.orders = next.withOrder(old, orderReleased, in.cust)
	next.orders = next.withOrder(in.order, orderReserved, in.cust)
	if in.code > 0 {
		codes := []byte(s.codes)
		if oc := s.ocode[old]; oc != 0 {
			codes[oc-1] = 0
		}
		codes[in.code-1] = 1
		next.codes = string(codes)
		next.ocode = setByte(s.ocode, in.order, byte(in.code)) //nolint:gosec // G115: NewModel keeps at most 255 codes
	}
	return OK, "", next
}

func (m *Model) expectRelease(s modelState, in modelInput) (Outcome, modelState) {
	st, owner := s.orderState(in.order)
	switch st {
	case orderAbsent:
		return NotFound, s
	case orderReleased:
		return OK, s
	}
	next := modelState{
		remaining: s.remaining + 1,
		cust:      s.withCust(owner, -1),
		orders:    s.withOrder(in.order, orderReleased, owner),
		codes:     s.codes,
		ocode:     s.ocode,
	}
	if m.nCode > 0 && s.ocode[in.order] != 0 {
		next.codes = setByte(s.codes, int(s.ocode[in.order])-1, 0)
	}
	return OK, next
}

func (m *Model) expectConfirm(s modelState, in modelInput) (Outcome, modelState) {
	st, owner := s.orderState(in.order)
	switch st {
	case orderAbsent:
		return NotFound, s
	case orderReleased:
		return ReservationReleased, s
	}
	return OK, modelState{remaining: s.remaining, cust: s.cust, orders: s.withOrder(in.order, orderConfirmed, owner),
		codes: s.codes, ocode: s.ocode}
}

func (m *Model) step(state, input, output any) (bool, any) {
	s := state.(modelState)
	in := input.(modelInput)
	out := output.(modelOutput).outcome
	var want, alt Outcome
	var next modelState
	switch in.kind {
	case Reserve:
		want, alt, next = m.expectReserve(s, in)
	case Release:
		want, next = m.expectRelease(s, in)
	case Confirm:
		want, next = m.expectConfirm(s, in)
	default:
		return false, s
	}
	switch {
	case out == Unknown:
		return true, next
	case out == Unavailable:
		return true, s
	case out == want:
		return true, next
	case alt != "" && out == alt:
		return true, s
	case !m.strict && in.kind == Reserve && (out == OutOfStock || out == AlreadyUsed):
		return true, s
	case !m.strict && in.kind == Reserve && in.replaces > 0 && out == ReplacedOrderNotHeld:
		return true, s
	}
	return false, s
}

func hashState(state any) uint64 {
	s := state.(modelState)
	h := fnv.New64a()
	var b [4]byte
	b[0], b[1], b[2], b[3] = byte(s.remaining), byte(s.remaining>>8), byte(s.remaining>>16), byte(s.remaining>>24) //nolint:gosec // G115: the four bytes of remaining, truncated on purpose
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(s.cust))
	_, _ = h.Write([]byte(s.orders))
	_, _ = h.Write([]byte(s.codes))
	_, _ = h.Write([]byte(s.ocode))
	return h.Sum64()
}

// describe renders a state compactly: remaining and the held orders.
func (m *Model) describe(s modelState) string {
	var held []string
	for i := 0; i < m.nOrder; i++ {
		st, owner := s.orderState(i)
		switch st {
		case orderReserved:
			held = append(held, fmt.Sprintf("%s/c%s", m.order[i], m.custID[owner]))
		case orderConfirmed:
			held = append(held, fmt.Sprintf("%s/c%s(C)", m.order[i], m.custID[owner]))
		}
	}
	sort.Strings(held)
	return fmt.Sprintf("remaining=%d held(%d)=[%s]", s.remaining, len(held), strings.Join(held, " "))
}

// Porcupine returns the porcupine model.
func (m *Model) Porcupine() porcupine.Model {
	return porcupine.Model{
		Init:  func() any { return m.init() },
		Step:  m.step,
		Hash:  hashState,
		Equal: func(a, b any) bool { return a.(modelState) == b.(modelState) },
		DescribeOperation: func(input, output any) string {
			in := input.(modelInput)
			order := in.op.OrderID
			if in.op.Replaces != "" {
				order += " replacing " + in.op.Replaces
			}
			return fmt.Sprintf("%s(%s, c%s, %s) -> %s", in.kind, in.op.Voucher, in.op.Customer, order, output.(modelOutput).outcome)
		},
		DescribeState: func(state any) string { return m.describe(state.(modelState)) },
	}
}

// LinResult is the outcome of a linearizability check.
type LinResult struct {
	Result   porcupine.CheckResult
	Ops      int
	Unknown  int
	Took     time.Duration
	Strict   bool
	Info     porcupine.LinearizationInfo
	Model    porcupine.Model
	Explain  string // for Illegal: the longest legal prefix and the op that cannot follow it
	Rendered string
}

// CheckLinearizable checks the voucher's operations in ops against the
// model, within timeout (porcupine.Unknown when it runs out). final may be
// nil.
func CheckLinearizable(spec VoucherSpec, strict bool, ops []Op, final Final, timeout time.Duration) (LinResult, error) {
	m, hist, err := NewModel(spec, strict, ops, final)
	if err != nil {
		return LinResult{}, err
	}
	res := LinResult{Ops: len(hist), Strict: strict, Model: m.Porcupine()}
	for _, h := range hist {
		if h.Return == math.MaxInt64 {
			res.Unknown++
		}
	}
	began := time.Now()
	res.Result, res.Info = porcupine.CheckOperationsVerbose(res.Model, hist, timeout)
	res.Took = time.Since(began)
	if res.Result == porcupine.Illegal {
		res.Explain = m.explain(hist, res.Info)
	}
	return res, nil
}

// explain replays the longest partial linearization porcupine found and
// names the operations that could not be placed after it: the ones whose
// return comes first among those left.
func (m *Model) explain(hist []porcupine.Operation, info porcupine.LinearizationInfo) string {
	parts := info.PartialLinearizationsOperations()
	if len(parts) == 0 {
		return "porcupine returned no partial linearization"
	}
	var longest []porcupine.Operation
	for _, p := range parts {
		for _, lin := range p {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	s := m.init()
	placed := map[*Op]bool{}
	for _, op := range longest {
		_, next := m.step(s, op.Input, op.Output)
		s = next.(modelState)
		placed[op.Input.(modelInput).op] = true
	}
	var left []porcupine.Operation
	for _, op := range hist {
		if !placed[op.Input.(modelInput).op] {
			left = append(left, op)
		}
	}
	sort.Slice(left, func(i, j int) bool { return left[i].Return < left[j].Return })
	var b strings.Builder
	fmt.Fprintf(&b, "longest linearizable prefix: %d of %d operations; state after it: remaining=%d\n", len(longest), len(hist), s.remaining)
	if n := len(longest); n > 0 {
		fmt.Fprintf(&b, "last operations of that prefix:\n")
		for _, op := range longest[max(0, n-5):] {
			fmt.Fprintf(&b, "    %v\n", *op.Input.(modelInput).op)
		}
	}
	fmt.Fprintf(&b, "operations that cannot be placed next (earliest returns first):\n")
	for i, op := range left {
		if i == 5 {
			break
		}
		in := op.Input.(modelInput)
		var want Outcome
		switch in.kind {
		case Reserve:
			want, _, _ = m.expectReserve(s, in)
			var extra string
			if in.replaces > 0 {
				extra += fmt.Sprintf(", replaced order %s", m.orderDesc(s, in.replaces-1))
			}
			if in.code > 0 {
				extra += fmt.Sprintf(", code %s held=%v", in.op.Voucher, s.codes[in.code-1] != 0)
			}
			fmt.Fprintf(&b, "    %v\n      model: order %s, customer %s holds %d of %d, remaining %d%s -> expected %s\n",
				*in.op, m.orderDesc(s, in.order), in.op.Customer, s.cust[in.cust], m.spec.PerUserLimit, s.remaining, extra, want)
		case Release:
			want, _ = m.expectRelease(s, in)
			fmt.Fprintf(&b, "    %v\n      model: order %s -> expected %s\n", *in.op, m.orderDesc(s, in.order), want)
		case Confirm:
			want, _ = m.expectConfirm(s, in)
			fmt.Fprintf(&b, "    %v\n      model: order %s -> expected %s\n", *in.op, m.orderDesc(s, in.order), want)
		}
	}
	return b.String()
}

func (m *Model) orderDesc(s modelState, i int) string {
	st, owner := s.orderState(i)
	name := [...]string{"absent", "RESERVED", "CONFIRMED", "RELEASED"}[st]
	if st == orderAbsent {
		return name
	}
	return fmt.Sprintf("%s by customer %s", name, m.custID[owner])
}
