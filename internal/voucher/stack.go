package voucher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxStackCodes is the most codes one order may present.
const MaxStackCodes = 5

// Reasons a stack is not eligible (CodeNotEligible).
const (
	// ReasonNotStackable: a code of a stack of several codes is not
	// stackable (Stacking.Stackable).
	ReasonNotStackable Reason = "NOT_STACKABLE"
	// ReasonExclusiveGroup: two codes of a stack share an exclusive group.
	ReasonExclusiveGroup Reason = "EXCLUSIVE_GROUP"
)

// CodePartOfStack refuses a per-code call on an order that presented
// several codes: such an order is acted on whole, through its orderId.
const CodePartOfStack ErrorCode = "PART_OF_STACK"

// Stacking says whether a voucher may be reserved together with other
// codes on one order. The zero value is not stackable.
type Stacking struct {
	Stackable bool
	// ExclusiveGroup, when set, allows at most one code of the group per
	// order; only a stackable voucher has one.
	ExclusiveGroup string
}

// MaxExclusiveGroupLen bounds Stacking.ExclusiveGroup.
const MaxExclusiveGroupLen = 64

// Validate checks the setting.
func (s Stacking) Validate() error {
	switch {
	case len(s.ExclusiveGroup) > MaxExclusiveGroupLen:
		return Errorf(CodeInvalidRequest, "stacking.exclusiveGroup must be 1-%d bytes", MaxExclusiveGroupLen)
	case !utf8.ValidString(s.ExclusiveGroup) || strings.ContainsFunc(s.ExclusiveGroup, unicode.IsControl):
		return Errorf(CodeInvalidRequest, "stacking.exclusiveGroup must be text without control characters")
	case s.ExclusiveGroup != "" && !s.Stackable:
		return Errorf(CodeInvalidRequest, "stacking.exclusiveGroup needs stacking.stackable true")
	}
	return nil
}

// StackingRefusals applies the stacking rule to an order presenting codes
// (in the order given) whose settings are known (a code missing from
// settings is not stackable): the reason each code is refused for, ""
// for a code the rule lets through. One code alone needs no setting;
// with several, every code must be stackable (NOT_STACKABLE), and a code
// whose exclusive group an earlier stackable code has is EXCLUSIVE_GROUP.
// The store's reservation refuses the first code with a reason, the
// validation each such item.
func StackingRefusals(codes []string, settings map[string]Stacking) []Reason {
	out := make([]Reason, len(codes))
	if len(codes) < 2 {
		return out
	}
	seen := map[string]bool{}
	for i, c := range codes {
		st := settings[c]
		switch {
		case !st.Stackable:
			out[i] = ReasonNotStackable
		case st.ExclusiveGroup != "" && seen[st.ExclusiveGroup]:
			out[i] = ReasonExclusiveGroup
		case st.ExclusiveGroup != "":
			seen[st.ExclusiveGroup] = true
		}
	}
	return out
}

// StackingError is the NOT_ELIGIBLE answer of reason for code.
func StackingError(code string, reason Reason) *Error {
	msg := "voucher " + code + " cannot be combined with other codes"
	if reason == ReasonExclusiveGroup {
		msg = "voucher " + code + " is of an exclusive group that an earlier code of the order has"
	}
	return &Error{Code: CodeNotEligible, Reason: reason, Message: msg}
}

// StackRequest asks for one use of each of several codes for one order,
// all or none. The discounts apply in the order of Codes, each to what the
// earlier ones left of OrderAmount.
type StackRequest struct {
	CustomerID  string
	OrderID     string
	OrderAmount int64
	Currency    string
	// Codes are 1 to MaxStackCodes distinct codes.
	Codes []string
	// Customers are CustomerID in the form each code's voucher counts it
	// (CustomerIDNormalization), one per code; set by the service.
	Customers []string
	// Windows are the start of the occurrence of each code's windows the
	// order falls in (zero: none), one per code; set by the service, as
	// ReserveRequest.Window.
	Windows []time.Time
	// ReplacesOrderID, when set, names the customer's RESERVED order (a
	// stack, or a single reservation) whose uses this order takes over:
	// it is released in the same transaction (in Kafka mode, by the
	// stack's event). Flash-sale vouchers on either side in flash-sync and
	// Kafka mode, where Kafka mode takes no standard voucher with them
	// (docs/stacks.md).
	ReplacesOrderID string
	// HeldSince is, for a replacement, when the replaced hold began (its
	// members continue it); set by the service.
	HeldSince time.Time
	// Requester is who sent the request (the code-guessing limit).
	Requester Requester
}

// Validate checks the ranges of the request fields.
func (r StackRequest) Validate() error {
	if err := r.validateCodes(); err != nil {
		return err
	}
	return ReserveRequest{Code: r.Codes[0], CustomerID: r.CustomerID, OrderID: r.OrderID,
		OrderAmount: r.OrderAmount, Currency: r.Currency, ReplacesOrderID: r.ReplacesOrderID}.Validate()
}

// validateCodes checks Codes: 1 to MaxStackCodes distinct valid codes.
func (r StackRequest) validateCodes() error {
	if len(r.Codes) == 0 || len(r.Codes) > MaxStackCodes {
		return Errorf(CodeInvalidRequest, "codes must hold 1 to %d codes", MaxStackCodes)
	}
	for i, c := range r.Codes {
		if !ValidCode(c) {
			return Errorf(CodeInvalidRequest, "codes[%d] must be 1-32 characters of A-Z a-z 0-9 _ -", i)
		}
		for _, d := range r.Codes[:i] {
			if d == c {
				return Errorf(CodeInvalidRequest, "codes must be distinct: %s is given twice", c)
			}
		}
	}
	return nil
}

// StackMemberOrderID is the orderId of the redemption that holds the code
// at position (1-based) of the stack orderID: the stack's own orderId for
// the first code, so that no single reservation can take that orderId,
// and a derived id for the others. A derived id is a valid orderId that a
// client could send; every path that meets one checks Store.StackOf
// (docs/stacks.md).
func StackMemberOrderID(orderID string, position int) string {
	if position <= 1 {
		return orderID
	}
	sum := sha256.Sum256([]byte(orderID))
	return "stack." + hex.EncodeToString(sum[:16]) + "." + strconv.Itoa(position)
}

// StackItem is one code of a stack and the redemption that holds it.
type StackItem struct {
	Code       string
	Redemption Redemption
}

// Stack is an order holding several codes.
type Stack struct {
	OrderID     string
	CustomerID  string
	OrderAmount int64
	CreatedAt   time.Time
	// Items are the codes in the order given.
	Items []StackItem
	// Replay: the stack was there already; this call took nothing.
	Replay bool
}

// DiscountAmount is the stack's total discount.
func (s Stack) DiscountAmount() int64 {
	var n int64
	for _, it := range s.Items {
		n += it.Redemption.DiscountAmount
	}
	return n
}

// Status is the stack's status: its members' when they agree, RELEASED
// when any member is released (the stack no longer holds every code),
// else RESERVED.
func (s Stack) Status() Status {
	if len(s.Items) == 0 {
		return StatusReleased
	}
	first := s.Items[0].Redemption.Status
	for _, it := range s.Items[1:] {
		if st := it.Redemption.Status; st != first {
			if st == StatusReleased || first == StatusReleased {
				return StatusReleased
			}
			return StatusReserved
		}
	}
	return first
}

// ExpiresAt is the earliest expiry of the stack's members.
func (s Stack) ExpiresAt() time.Time {
	var t time.Time
	for i, it := range s.Items {
		if i == 0 || it.Redemption.ExpiresAt.Before(t) {
			t = it.Redemption.ExpiresAt
		}
	}
	return t
}

// StackValidation is what a stack would be given now.
type StackValidation struct {
	Items []StackValidationItem
}

// Valid reports whether every code would be given.
func (v StackValidation) Valid() bool {
	for _, it := range v.Items {
		if !it.Validation.Valid {
			return false
		}
	}
	return true
}

// DiscountAmount is the total discount of the codes that would be given.
func (v StackValidation) DiscountAmount() int64 {
	var n int64
	for _, it := range v.Items {
		if it.Validation.Valid {
			n += it.Validation.DiscountAmount
		}
	}
	return n
}

// StackValidationItem is the answer for one code of a validated stack.
type StackValidationItem struct {
	Code       string
	Validation Validation
}

// withFailedCode returns err as an *Error naming code as the one that
// failed; a shared error is copied, never changed.
func withFailedCode(err error, code string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	c.FailedCode = code
	return &c
}

// ReserveStack takes one use of each code of req for its order, all or
// none: a refusal of any code is that code's error with FailedCode, and
// nothing stays held. Standard vouchers are written by the store's one
// transaction; flash-sale vouchers are taken in the gate first in
// flash-sync mode (reserveStackSync), and in Kafka mode taken in the
// gate and published as one event (reserveStackKafka; docs/stacks.md). Every valid request is reported to the Observer
// (Stacked).
func (s *Service) ReserveStack(ctx context.Context, req StackRequest) (Stack, error) {
	if err := req.Validate(); err != nil {
		return Stack{}, err
	}
	so := stackObservation{mode: ModeStandard}
	st, err := s.reserveStack(ctx, req, &so)
	s.obs.Stacked(so.mode, len(req.Codes), CodeOf(err), failedPosition(err, req.Codes), so.gaveBack)
	return st, err
}

// stackObservation is what reserveStack reports of one request: the
// write path it took and the uses the gate gave back before answering.
type stackObservation struct {
	mode     Mode
	gaveBack int
}

// failedPosition is the position (1-based, in the order given) of the
// code err names as the one that failed; 0 for none.
func failedPosition(err error, codes []string) int {
	var e *Error
	if !errors.As(err, &e) || e.FailedCode == "" {
		return 0
	}
	for i, c := range codes {
		if c == e.FailedCode {
			return i + 1
		}
	}
	return 0
}

// reserveStack is ReserveStack once req is valid; so records the mode
// and the give-backs.
func (s *Service) reserveStack(ctx context.Context, req StackRequest, so *stackObservation) (Stack, error) {
	start := s.now()
	if err := s.guessCheck(req.CustomerID, req.Requester); err != nil {
		return Stack{}, err
	}
	req.Customers = make([]string, len(req.Codes))
	req.Windows = make([]time.Time, len(req.Codes))
	rts := make([]route, len(req.Codes))
	flash := false
	for i, code := range req.Codes {
		rt, err := s.routeNew(ctx, code, req.OrderID, start)
		if err != nil {
			s.guessNoted(req.CustomerID, req.Requester, err)
			return Stack{}, withFailedCode(err, code)
		}
		if rt.v.Campaign && rt.v.Code == code {
			return Stack{}, withFailedCode(Reject(CodeVoucherNotFound, "", Facts{Voucher: code}), code)
		}
		req.Customers[i] = rt.v.CustomerIDNormalization.Apply(req.CustomerID)
		req.Windows[i] = rt.v.Occurrence(start).Start
		rts[i], flash = rt, flash || rt.v.FlashSale
	}
	ttl := s.cfg.ReservationTTL
	var replaced []stackReplaced
	if req.ReplacesOrderID != "" {
		_, sync := s.writes.(*syncWrites)
		kw, kafka := s.writes.(*kafkaWrites)
		if code := firstFlash(rts); code != "" && !sync && !kafka {
			return Stack{}, notStackableHere(code, "a replacement of several codes takes flash-sale vouchers in flash-sync or Kafka mode only")
		}
		if kafka {
			// The replaced order is in the store before the replacement's
			// event is produced: the event need not share its partition.
			if err := s.replacedWritten(ctx, kw, req.ReplacesOrderID); err != nil {
				return Stack{}, err
			}
		}
		var err error
		if ttl, replaced, err = s.stackReplacement(ctx, &req, start, sync || kafka); err != nil {
			return Stack{}, err
		}
		if kafka {
			if err := kafkaReplacementMix(rts, replaced); err != nil {
				return Stack{}, err
			}
		}
		for _, m := range replaced {
			// The gate gives back a replaced flash code's use.
			flash = flash || m.rt.v.FlashSale
		}
	}
	if flash {
		switch w := s.writes.(type) {
		case *syncWrites:
			so.mode = ModeFlashSync
			st, err := s.reserveStackSync(ctx, s.flash.(*flashPath), w, stackSyncOrder{req: req, rts: rts, replaced: replaced, ttl: ttl}, start, &so.gaveBack)
			if !errors.Is(err, errKnownStack) {
				return st, err
			}
			// A known stack: the store answers it, taking nothing.
		case nil:
			if !s.cfg.FlashFallback {
				return Stack{}, Unavailable(nil, "flash vouchers need Redis, which is not configured")
			}
		case *kafkaWrites:
			so.mode = ModeFlashKafka
			return s.reserveStackKafka(ctx, s.flash.(*flashPath), w, stackSyncOrder{req: req, rts: rts, replaced: replaced, ttl: ttl}, start, &so.gaveBack)
		}
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	return s.store.ReserveStack(wctx, req, s.now(), ttl)
}

// stackReplaced is a member of the order a stack replaces: its code's
// route and the member's orderId (the order's own for a single).
type stackReplaced struct {
	rt      route
	orderID string
}

// stackReplacement bounds a replacing stack's TTL by the replaced hold's
// start (replacementUntil: MaxHold from it), records that start in
// req.HeldSince and returns the replaced order's members. A flash-sale
// voucher among them is refused unless gated (flash-sync or Kafka mode,
// where the gate moves its use: reserveStackSync, reserveStackKafka). The
// store checks that the order is the customer's RESERVED hold (in Kafka
// mode the gate's moves, and replacedHeldKafka).
func (s *Service) stackReplacement(ctx context.Context, req *StackRequest, now time.Time, gated bool) (time.Duration, []stackReplaced, error) {
	old, err := s.store.Order(ctx, req.ReplacesOrderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return 0, nil, Reject(CodeReplacedOrderNotHeld, "", Facts{Voucher: req.Codes[0], OrderID: req.ReplacesOrderID, CustomerID: req.CustomerID})
	case err != nil:
		return 0, nil, err
	}
	members := []stackReplaced{{rt: route{code: old.VoucherCode}, orderID: req.ReplacesOrderID}}
	if st, err := s.store.Stack(ctx, req.ReplacesOrderID); err == nil {
		members = members[:0]
		for _, it := range st.Items {
			members = append(members, stackReplaced{rt: route{code: it.Code}, orderID: it.Redemption.OrderID})
		}
	} else if !IsCode(err, CodeReservationNotFound) {
		return 0, nil, err
	}
	for i := range members {
		members[i].rt = s.routeKnown(ctx, members[i].rt.code)
		if members[i].rt.v.FlashSale && !gated {
			return 0, nil, notStackableHere(members[i].rt.code, "a replacement of several codes replaces flash-sale vouchers in flash-sync or Kafka mode only")
		}
	}
	if old.HoldStart().IsZero() {
		return s.cfg.ReservationTTL, members, nil
	}
	until, err := replacementUntil(&s.cfg, ReserveRequest{Code: req.Codes[0], ReplacesOrderID: req.ReplacesOrderID}, old.HoldStart(), now)
	if err != nil {
		return 0, nil, err
	}
	req.HeldSince = old.HoldStart()
	return until.Sub(now), members, nil
}

// Stack returns the stack of orderID.
func (s *Service) Stack(ctx context.Context, orderID string) (Stack, error) {
	if !ValidOrderID(orderID) {
		return Stack{}, stackNotFound(orderID)
	}
	st, err := s.store.Stack(ctx, orderID)
	if IsCode(err, CodeReservationNotFound) {
		return s.unwrittenStack(ctx, orderID, err)
	}
	return st, err
}

// ConfirmStack confirms every code of the stack orderID, all or none.
func (s *Service) ConfirmStack(ctx context.Context, orderID string) (Stack, error) {
	if !ValidOrderID(orderID) {
		return Stack{}, stackNotFound(orderID)
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	if err := s.beforeConfirmStack(wctx, orderID); err != nil {
		return Stack{}, err
	}
	st, err := s.stackWrite(wctx, orderID, func() (Stack, error) { return s.store.ConfirmStack(wctx, orderID, s.now()) })
	if err == nil {
		s.confirmedStack(wctx, st)
	}
	return st, err
}

// ReleaseStack gives back every code of the stack orderID at once;
// idempotent.
func (s *Service) ReleaseStack(ctx context.Context, orderID string) (Stack, error) {
	if !ValidOrderID(orderID) {
		return Stack{}, stackNotFound(orderID)
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	st, err := s.stackWrite(wctx, orderID, func() (Stack, error) { return s.store.ReleaseStack(wctx, orderID, s.now()) })
	if err != nil {
		return Stack{}, err
	}
	s.releasedStack(wctx, st)
	return st, nil
}

// ExtendStack extends every code of the stack orderID by d (Extend's
// rules), all or none.
func (s *Service) ExtendStack(ctx context.Context, orderID string, d time.Duration) (Stack, error) {
	if !ValidOrderID(orderID) {
		return Stack{}, stackNotFound(orderID)
	}
	if d < time.Second || d > MaxExtension {
		return Stack{}, Errorf(CodeInvalidRequest, "seconds must be between 1 and %d", int64(MaxExtension/time.Second))
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	now := s.now()
	st, err := s.stackWrite(wctx, orderID, func() (Stack, error) {
		return s.store.ExtendStack(wctx, orderID, now.Add(d).Truncate(time.Millisecond), now, s.cfg.MaxHold)
	})
	if err != nil {
		return Stack{}, err
	}
	s.extendedStack(wctx, st)
	return st, nil
}

// stackConflict answers a per-code reservation replayed on orderId:
// ORDER_CONFLICT when the orderId is a stack's or one of its members'.
// Only replays ask: a new orderId cannot be a stack's, whose first member
// holds it.
func (s *Service) stackConflict(ctx context.Context, req ReserveRequest) error {
	if _, found, err := s.store.StackOf(ctx, req.OrderID); err != nil || !found && s.kafkaStackPart(ctx, req.OrderID) == "" {
		return err
	}
	return Reject(CodeOrderConflict, "", Facts{Voucher: req.Code, OrderID: req.OrderID})
}

// notPartOfStack refuses a per-code call on orderID when it is a stack or
// one of its members (PART_OF_STACK): a stack is acted on whole.
func (s *Service) notPartOfStack(ctx context.Context, orderID string) error {
	stack, found, err := s.store.StackOf(ctx, orderID)
	switch {
	case err != nil:
		return err
	case !found:
		if stack = s.kafkaStackPart(ctx, orderID); stack == "" {
			return nil
		}
	}
	return Errorf(CodePartOfStack, "order %s holds several codes: act on it with /reservations/%s", orderID, stack)
}

// firstFlash is the first flash-sale voucher's code of rts, "" for none.
func firstFlash(rts []route) string {
	for _, rt := range rts {
		if rt.v.FlashSale {
			return rt.code
		}
	}
	return ""
}

// notStackableHere refuses code in an order of several codes that this
// mode does not serve for it (NOT_ELIGIBLE, NOT_STACKABLE): an answer about
// the voucher's kind, not the request's form.
func notStackableHere(code, why string) error {
	return &Error{Code: CodeNotEligible, Reason: ReasonNotStackable, FailedCode: code,
		Message: "voucher " + code + " is a flash-sale voucher: " + why}
}

// errKnownStack tells ReserveStack that the orderId is a known stack,
// which the store answers.
var errKnownStack = errors.New("known stack")

func stackNotFound(orderID string) error {
	return Errorf(CodeReservationNotFound, "no order %s holding several codes", orderID)
}

// expireStacks releases whole the stacks some of whose members the expiry
// sweep released: the members of a stack share their expiry, but a sweep
// batch may end between them.
func (s *Service) expireStacks(ctx context.Context, released []Redemption) error {
	if len(released) == 0 {
		return nil
	}
	ids := make([]string, len(released))
	for i, r := range released {
		ids[i] = r.OrderID
	}
	stacks, err := s.store.StacksOf(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range stacks {
		st, err := s.store.ReleaseStack(ctx, id, s.now())
		if err != nil {
			return err
		}
		s.releasedStack(ctx, st)
	}
	return nil
}

// ValidateStack answers, per code and in total, what ReserveStack of the
// same codes would give now, taking nothing: each code is validated as
// POST /vouchers/{code}/validation validates it (every mode's own
// validation), on what the earlier valid codes left of the order amount,
// and the stacking rules are checked for several codes. A refusal that is
// no rule's (the code does not exist, a dependency is down) answers the
// whole request, with FailedCode.
func (s *Service) ValidateStack(ctx context.Context, req StackRequest) (StackValidation, error) {
	if err := req.validateCodes(); err != nil {
		return StackValidation{}, err
	}
	if err := (ValidateRequest{Code: req.Codes[0], CustomerID: req.CustomerID, OrderAmount: req.OrderAmount,
		Currency: req.Currency}).Validate(); err != nil {
		return StackValidation{}, err
	}
	out := StackValidation{Items: make([]StackValidationItem, len(req.Codes))}
	settings := map[string]Stacking{}
	if len(req.Codes) > 1 {
		for _, code := range req.Codes {
			st, err := s.store.VoucherStacking(ctx, code)
			if err != nil {
				return StackValidation{}, withFailedCode(err, code)
			}
			settings[code] = st
		}
	}
	refusals := StackingRefusals(req.Codes, settings)
	left := req.OrderAmount
	for i, code := range req.Codes {
		v, err := s.Validate(ctx, ValidateRequest{Code: code, CustomerID: req.CustomerID, OrderAmount: left,
			Currency: req.Currency, Requester: req.Requester})
		if err != nil {
			return StackValidation{}, withFailedCode(err, code)
		}
		if v.Valid && refusals[i] != "" {
			e := StackingError(code, refusals[i])
			v = Validation{Code: e.Code, Reason: e.Reason, Message: e.Message}
		}
		out.Items[i] = StackValidationItem{Code: code, Validation: v}
		if v.Valid {
			left -= v.DiscountAmount
		}
	}
	return out, nil
}
