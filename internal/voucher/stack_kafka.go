package voucher

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"
)

// A stack of flash vouchers in Kafka mode (docs/stacks.md, "Kafka mode"):
// the gate records the stack in the claims of its orderId and of each
// member's orderId (StackRecord) before the first take, takes the members
// in code order as flash-sync does, then one event carries every member
// and the consumer writes them all or none. Until the consumer has
// written it, the stack's routes and the per-code routes of its members
// find it through that record.

// reserveStackKafka reserves a stack of flash vouchers in Kafka mode. A
// standard voucher in the stack is refused (NOT_STACKABLE): its use would
// be taken by a store transaction of its own, apart from the event's, so
// the stack could be written in part. gaveBack counts the uses given back
// before answering.
//
// A replacement (o.replaced, all flash-sale vouchers, already in the
// store: reserveStack) moves each replaced member's use in the gate before
// the event is produced, in code order with the new members' takes: a
// code the new order keeps to its new member (Gate.Replace), a code it
// drops to a transit hold of its own (replacedTransits), so that from the
// move on the gate answers every replaced member released (a confirmation
// of it is refused) while no other order can take its use. Once the event
// is acknowledged the stack is written from the gate (applyUnwrittenStack:
// the replaced order released in the same transaction, as the consumer
// does), and only then are the transit holds given back.
func (s *Service) reserveStackKafka(ctx context.Context, fp *flashPath, w *kafkaWrites, o stackSyncOrder, now time.Time, gaveBack *int) (Stack, error) {
	req, rts := o.req, o.rts
	for _, rt := range rts {
		if !rt.v.FlashSale {
			return Stack{}, &Error{Code: CodeNotEligible, Reason: ReasonNotStackable, FailedCode: rt.code,
				Message: "voucher " + rt.code + " is a standard voucher: in Kafka mode a stack holding a flash-sale voucher holds flash-sale vouchers only"}
		}
	}
	at := now.Truncate(time.Millisecond)
	rec := StackRecord{OrderID: req.OrderID, CustomerID: req.CustomerID, OrderAmount: req.OrderAmount, Codes: req.Codes, At: at,
		Replaces: req.ReplacesOrderID}
	owner, err := s.gate.OrderOwner(ctx, req.OrderID)
	if err != nil {
		return Stack{}, err
	}
	if owner != (OrderOwner{}) {
		return s.replayStackKafka(ctx, w, rec, owner)
	}
	if st, known, err := s.storedStack(ctx, w, rec); known {
		return st, err
	}
	settings, err := s.stackingSettings(ctx, rts)
	if err != nil {
		return Stack{}, err
	}
	for i, reason := range StackingRefusals(req.Codes, settings) {
		if reason != "" {
			return Stack{}, withFailedCode(StackingError(req.Codes[i], reason), req.Codes[i])
		}
	}
	if err := s.stackEligible(ctx, req, rts, now); err != nil {
		if errors.Is(err, errKnownStack) {
			// The store has a stack of the orderId after all (its first
			// read above did not answer in time).
			st, _, err := s.answerStoredStack(ctx, rec)
			return st, err
		}
		return Stack{}, err
	}
	if req.ReplacesOrderID != "" {
		if err := s.replacedHeldKafka(ctx, req); err != nil {
			return Stack{}, err
		}
	}
	takes, kept := stackKafkaTakes(s, o, at)
	transits, err := s.replacedTransits(ctx, o, kept, at)
	if err != nil {
		return Stack{}, err
	}
	claimed, err := s.claimStack(ctx, w, rec)
	if err != nil {
		return Stack{}, err
	}
	if claimed != nil {
		// A concurrent copy of the request claimed it first.
		return s.replayStackKafka(ctx, w, rec, *claimed)
	}
	// One slice, so that the takes and the moves run in one code order
	// and are undone together.
	all := make([]stackTake, 0, len(takes)+len(transits))
	all = append(append(all, takes...), transits...)
	takes, transits = all[:len(takes)], all[len(takes):]
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return all[order[a]].rt.gateCode() < all[order[b]].rt.gateCode() })
	for _, i := range order {
		t := &all[i]
		err := s.takeStackMember(ctx, fp, t, req, now)
		if err == nil && !t.taken {
			// The gate holds the member's orderId from before this claim
			// (an older order of the same id): not this stack's.
			err = orderConflict(t.rt.code, t.hold.OrderID, "")
		}
		if err != nil {
			*gaveBack += s.untakeStack(ctx, all)
			if !IsOutcomeUnknown(err) {
				s.unclaimStack(ctx, rec)
			}
			if IsCode(err, CodeReplacedOrderNotHeld) {
				// About the replaced order, not the code (as the store answers it).
				return Stack{}, err
			}
			return Stack{}, withFailedCode(err, t.rt.code)
		}
	}
	return s.publishStack(ctx, w, rec, takes, transits, gaveBack)
}

// kafkaReplacementMix refuses, in Kafka mode, a replacement of several
// codes that names a flash-sale voucher on either side and a standard
// voucher on either side (NOT_STACKABLE, failedCode the first standard
// code of the new order, else of the replaced one), as a new stack mixing
// them is refused: the standard voucher's use would be given back or taken
// by a store transaction apart from the event's.
func kafkaReplacementMix(rts []route, replaced []stackReplaced) error {
	flash, std := firstFlash(rts) != "", ""
	for _, rt := range rts {
		if !rt.v.FlashSale && std == "" {
			std = rt.code
		}
	}
	for _, m := range replaced {
		flash = flash || m.rt.v.FlashSale
		if !m.rt.v.FlashSale && std == "" {
			std = m.rt.code
		}
	}
	if !flash || std == "" {
		return nil
	}
	return &Error{Code: CodeNotEligible, Reason: ReasonNotStackable, FailedCode: std,
		Message: "voucher " + std + " is a standard voucher: in Kafka mode a replacement naming a flash-sale voucher on either side names flash-sale vouchers only"}
}

// replacedHeldKafka refuses a replacement whose replaced order the store
// does not have as the customer's RESERVED hold (REPLACED_ORDER_NOT_HELD):
// the store learns of a Kafka-mode replacement only from its event, so
// the check the store's own transaction makes in the other modes is made
// here, once a replay of the request has been answered; the gate's moves
// check the holds again.
func (s *Service) replacedHeldKafka(ctx context.Context, req StackRequest) error {
	notHeld := Reject(CodeReplacedOrderNotHeld, "", Facts{Voucher: req.Codes[0], OrderID: req.ReplacesOrderID, CustomerID: req.CustomerID})
	old, err := s.store.Order(ctx, req.ReplacesOrderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return notHeld
	case err != nil:
		return err
	case old.Status != StatusReserved:
		return notHeld
	}
	owner := old.CustomerID
	if stack, found, err := s.store.StackOf(ctx, req.ReplacesOrderID); err != nil {
		return err
	} else if found && stack != req.ReplacesOrderID {
		// A member of a stack is not an order of its own.
		return notHeld
	} else if found {
		st, err := s.store.Stack(ctx, req.ReplacesOrderID)
		if err != nil {
			return err
		}
		owner = st.CustomerID
	}
	if owner != req.CustomerID && !slices.Contains(req.Customers, owner) {
		return notHeld
	}
	return nil
}

// replacedWritten makes sure, in Kafka mode, that the store has the order
// a stack replaces before the replacement's event is produced: the event
// is keyed by its own first code, so the consumer could apply it before
// the replaced order's own event. An order the consumer has not written
// yet is written from the gate (applyUnwrittenStack for a stack,
// applyUnwritten for a single); one still pending, or that the gate
// cannot write while the consumer is behind, answers 503. An order
// neither has is left to stackReplacement (REPLACED_ORDER_NOT_HELD).
func (s *Service) replacedWritten(ctx context.Context, w *kafkaWrites, orderID string) error {
	if _, err := s.store.Order(ctx, orderID); !IsCode(err, CodeReservationNotFound) {
		return err
	}
	owner, err := s.gate.OrderOwner(ctx, orderID)
	switch {
	case err != nil:
		return err
	case owner.Stack != nil && owner.Stack.OrderID == orderID:
		_, err = s.applyUnwrittenStack(ctx, orderID)
	case owner.Code != "":
		if rt := s.routeKnown(ctx, owner.Code); rt.v.FlashSale {
			_, err = w.applyUnwritten(ctx, rt, orderID)
		}
	default:
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := s.store.Order(ctx, orderID); !IsCode(err, CodeReservationNotFound) {
		return err
	}
	if cerr := w.events.CaughtUp(ctx); cerr != nil {
		return &Error{Code: CodeUnavailable, RetryAfter: time.Second, Err: cerr,
			Message: "order " + orderID + " is still being written; retry"}
	}
	return nil
}

// stackingSettings reads each code's stacking setting from the store, as
// the store's own ReserveStack does, so that a PATCH is seen by the next
// stack. While the store cannot be read (or has not answered them all
// within storeCheckWait) the cached definition's setting stands in: every
// definition is read with its setting (voucher_get, voucher_definition,
// code_resolve), as it was when the definition was read.
func (s *Service) stackingSettings(ctx context.Context, rts []route) (map[string]Stacking, error) {
	settings := make(map[string]Stacking, len(rts))
	if len(rts) < 2 {
		return settings, nil
	}
	rctx, cancel := context.WithTimeout(ctx, storeCheckWait)
	defer cancel()
	for _, rt := range rts {
		st, err := s.store.VoucherStacking(rctx, rt.code)
		switch {
		case IsCode(err, CodeUnavailable), err != nil && rctx.Err() != nil && ctx.Err() == nil:
			st = rt.v.Stacking
		case err != nil:
			return nil, withFailedCode(err, rt.code)
		}
		settings[rt.code] = st
	}
	return settings, nil
}

// stackKafkaTakes computes each member's pending hold as reserveStackSync
// does: the discount of the cached definition on what the earlier codes
// leave, the expiry o.ttl ahead; a member whose code the replaced order
// holds too (kept, by the replaced member's index) takes that member's
// use over (Replaces).
func stackKafkaTakes(s *Service, o stackSyncOrder, at time.Time) ([]stackTake, []bool) {
	req := o.req
	takes := make([]stackTake, len(o.rts))
	kept := make([]bool, len(o.replaced))
	left := req.OrderAmount
	for i, rt := range o.rts {
		d := rt.v.Discount().Compute(left)
		takes[i] = stackTake{rt: rt, hold: Hold{
			OrderID: StackMemberOrderID(req.OrderID, i+1), CustomerID: req.Customers[i], OrderAmount: left,
			DiscountAmount: d, ReservedAt: at, ExpiresAt: at.Add(o.ttl), Owner: s.cfg.Instance, Pending: true,
			HeldSince: req.HeldSince, Budget: Budget{Amount: rt.v.Budget.Amount, Clip: rt.v.Budget.Clip},
			Window: req.Windows[i], WindowLimit: rt.v.WindowLimit,
		}}
		for j, m := range o.replaced {
			if m.rt.gateCode() == rt.gateCode() {
				takes[i].hold.Replaces, kept[j] = m.orderID, true
			}
		}
		left -= d
	}
	return takes, kept
}

// replacedTransits are, for a replacement in Kafka mode, the holds that
// take over the use of each replaced member whose code the new order does
// not keep, from the move until the replacement is in the store: under
// an orderId of their own past the stack's members
// (StackMemberOrderID(orderId, MaxStackCodes+1+j)), pending, with the
// replaced member's amounts and window, so that the use is never free
// while PostgreSQL still holds it, and a confirmation of the replaced
// member finds it released in the gate. A transit hold never has a row:
// it is given back once the store has released the replaced member
// (publishStack), else settled as the new members are (fenceHold: back to
// the replaced member while the store holds it, else to the voucher). A
// replaced member the gate does not hold for the customer is
// REPLACED_ORDER_NOT_HELD.
func (s *Service) replacedTransits(ctx context.Context, o stackSyncOrder, kept []bool, at time.Time) ([]stackTake, error) {
	var out []stackTake
	for j, m := range o.replaced {
		if kept[j] {
			continue
		}
		old, found, err := s.gate.Lookup(ctx, m.rt.gateCode(), m.orderID)
		switch {
		case err != nil:
			return nil, err
		case !found || old.Released:
			return nil, Reject(CodeReplacedOrderNotHeld, "", Facts{Voucher: o.req.Codes[0], OrderID: o.req.ReplacesOrderID, CustomerID: o.req.CustomerID})
		}
		out = append(out, stackTake{rt: m.rt, hold: Hold{
			OrderID:    StackMemberOrderID(o.req.OrderID, MaxStackCodes+1+j),
			CustomerID: m.rt.v.CustomerIDNormalization.Apply(o.req.CustomerID), OrderAmount: old.OrderAmount,
			DiscountAmount: old.DiscountAmount, ReservedAt: at, ExpiresAt: at.Add(o.ttl), Owner: s.cfg.Instance, Pending: true,
			Replaces: m.orderID, HeldSince: o.req.HeldSince, Budget: Budget{Amount: m.rt.v.Budget.Amount, Clip: m.rt.v.Budget.Clip},
			Window: old.Window, WindowLimit: m.rt.v.WindowLimit,
		}})
	}
	return out, nil
}

// claimStack claims the stack's orderId, then each member's, for rec. It
// returns the owner when the stack's orderId is claimed already (the
// caller replays against it); a member's orderId claimed by anything else
// is ORDER_CONFLICT naming that member's code, with every claim of this
// call dropped.
func (s *Service) claimStack(ctx context.Context, w *kafkaWrites, rec StackRecord) (*OrderOwner, error) {
	until := s.now().Add(claimTTL)
	owner, err := s.gate.ClaimStack(ctx, rec.OrderID, rec, until)
	if err != nil {
		return nil, err
	}
	if owner.Stack == nil || !owner.Stack.Same(rec) || !owner.Stack.At.Equal(rec.At) {
		return &owner, nil
	}
	for i := 2; i <= len(rec.Codes); i++ {
		member := StackMemberOrderID(rec.OrderID, i)
		owner, err := s.gate.ClaimStack(ctx, member, rec, until)
		if err == nil && (owner.Stack == nil || !owner.Stack.Same(rec)) {
			err = orderConflict(rec.Codes[i-1], member, owner.Code)
		}
		if err != nil {
			s.unclaimStack(ctx, rec)
			return nil, withFailedCode(err, rec.Codes[i-1])
		}
	}
	return nil, nil
}

// unclaimStack drops rec's claims (a refused stack's orderId may be used
// afresh); a claim left behind answers a retry ORDER_CONFLICT or a replay
// that finds no hold, until it expires.
func (s *Service) unclaimStack(ctx context.Context, rec StackRecord) {
	cctx, cancel := s.writeContext(ctx)
	defer cancel()
	for i := len(rec.Codes); i >= 1; i-- {
		id := StackMemberOrderID(rec.OrderID, i)
		if err := s.gate.UnclaimStack(cctx, id, rec); err != nil {
			s.log.WarnContext(ctx, "could not drop a stack's orderId claim", "orderId", id, "err", err)
		}
	}
}

// stackEvent is the one event of a stack whose members takes hold: a
// replacement's names the order rec replaces (the first member's hold
// names the replaced member it moved from, not the order) and carries the
// members' HeldSince.
func stackEvent(rec StackRecord, takes []stackTake) ReservedEvent {
	e := EventFromHold(takes[0].rt.gateCode(), takes[0].hold)
	e.StackCustomerID = rec.CustomerID
	e.ReplacesOrderID = rec.Replaces
	if rec.Replaces == "" {
		e.HeldSince = time.Time{}
	}
	for _, t := range takes {
		e.Members = append(e.Members, StackEventMember{Code: t.rt.gateCode(), CustomerID: t.hold.CustomerID, OrderID: t.hold.OrderID,
			OrderAmount: t.hold.OrderAmount, DiscountAmount: t.hold.DiscountAmount, Window: t.hold.Window})
	}
	return e
}

// publishStack produces the stack's one event once the gate holds every
// member, and answers once Kafka acknowledged it, each member's hold then
// made durable. A produce that provably failed gives every use back (a
// moved one to the replaced member); one of unknown outcome keeps the
// holds pending and remembers each member's event, and each transit
// hold's (settleEvent fences each alone: the consumer writes the stack
// whole or not at all, so every member's fence finds the same outcome).
// A replacement is then written from the gate before the answer
// (settleReplacement).
func (s *Service) publishStack(ctx context.Context, w *kafkaWrites, rec StackRecord, takes, transits []stackTake, gaveBack *int) (Stack, error) {
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	perr := s.events.PublishReserved(wctx, stackEvent(rec, takes))
	if perr != nil {
		if errors.Is(perr, ErrOutcomeUnknown) {
			s.log.WarnContext(ctx, "stack event outcome unknown; holds kept pending", "orderId", rec.OrderID, "err", perr)
			for _, t := range append(takes, transits...) {
				s.unanswered.rememberEvent(t.rt.gateCode(), t.hold, s.now())
			}
			return Stack{}, &Error{Code: CodeUnavailable, Err: perr, OutcomeUnknown: true,
				Message: "Kafka did not acknowledge in time; the order may or may not stand: retry with the same orderId"}
		}
		*gaveBack += s.giveBackStackKafka(ctx, append(takes, transits...), perr)
		s.unclaimStack(ctx, rec)
		if !IsCode(perr, CodeUnavailable) {
			perr = Unavailable(perr, "could not record the order")
		}
		return Stack{}, perr
	}
	st := Stack{OrderID: rec.OrderID, CustomerID: rec.CustomerID, OrderAmount: rec.OrderAmount, CreatedAt: rec.At}
	for _, t := range takes {
		committed, err := s.gate.Commit(wctx, t.rt.gateCode(), t.hold)
		if err != nil {
			s.log.ErrorContext(ctx, "hold not marked durable in the gate", "code", t.rt.code, "orderId", t.hold.OrderID, "err", err)
		}
		if err == nil && !committed {
			// Fenced meanwhile (this instance stalled past its
			// heartbeat): the event is refused whole by the consumer.
			if _, done, err := w.notCommitted(wctx, t.rt.gateCode(), t.hold); done {
				s.settleTransitsLater(transits)
				return Stack{}, withFailedCode(err, t.rt.code)
			}
		}
		h := t.hold
		h.Pending = false
		st.Items = append(st.Items, StackItem{Code: t.rt.code, Redemption: holdRedemption(t.rt.gateCode(), h, StatusReserved)})
	}
	if rec.Replaces != "" {
		s.settleReplacement(wctx, rec, transits)
	}
	return st, nil
}

// settleReplacement writes an acknowledged replacing stack from the gate
// (applyUnwrittenStack, the consumer's own apply: the replaced order is
// released in the same transaction, and the event arriving later changes
// nothing), then gives back the transit holds: the store no longer holds
// their uses. A write that fails leaves them to the settle (the 201
// stands: the event is durable).
func (s *Service) settleReplacement(ctx context.Context, rec StackRecord, transits []stackTake) {
	if _, err := s.applyUnwrittenStack(ctx, rec.OrderID); err != nil {
		s.log.WarnContext(ctx, "replacing stack not written from the gate; the consumer writes it and the settle gives the replaced uses back",
			"orderId", rec.OrderID, "replaces", rec.Replaces, "err", err)
		s.settleTransitsLater(transits)
		return
	}
	for _, t := range transits {
		if _, err := s.gate.Release(ctx, t.rt.gateCode(), t.hold.OrderID, ReleaseForget); err != nil {
			s.log.WarnContext(ctx, "a replaced use not given back in the gate; the settle will", "code", t.rt.code,
				"orderId", t.hold.OrderID, "err", err)
			s.unanswered.rememberEvent(t.rt.gateCode(), t.hold, s.now())
		}
	}
}

// settleTransitsLater leaves the transit holds to settleEvent, which
// fences each once the consumer has applied what Kafka acknowledged: back
// to the replaced member while the store holds it, else to the voucher.
func (s *Service) settleTransitsLater(transits []stackTake) {
	for _, t := range transits {
		s.unanswered.rememberEvent(t.rt.gateCode(), t.hold, s.now())
	}
}

// giveBackStackKafka gives back, in reverse order, the uses taken for a
// stack whose event provably failed (a use moved from a replaced member
// back to it: giveBack); it returns their number.
func (s *Service) giveBackStackKafka(ctx context.Context, takes []stackTake, cause error) int {
	n := 0
	for i := len(takes) - 1; i >= 0; i-- {
		if t := takes[i]; t.taken {
			s.giveBack(ctx, ModeFlashKafka, t.rt.gateCode(), t.hold, cause)
			n++
		}
	}
	return n
}

// storedStack answers a stack request whose orderId the store knows
// already (known): a stack's replay, ORDER_RELEASED or ORDER_CONFLICT, as
// the store's own ReserveStack answers them, or ORDER_CONFLICT for another
// order of the id. The orderId may be the store's alone (an order of
// another mode, or a claim expired); a store that cannot answer within
// storeCheckWait leaves the decision to the gate's claim, as for a single.
func (s *Service) storedStack(ctx context.Context, w *kafkaWrites, rec StackRecord) (Stack, bool, error) {
	rctx, cancel := context.WithTimeout(ctx, storeCheckWait)
	defer cancel()
	// A stack's orderId is its first member's (Store.Order, shared with
	// concurrent singles' reads).
	row, err := s.store.Order(rctx, rec.OrderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return s.storedMember(rctx, rec)
	case err != nil:
		return Stack{}, false, nil
	}
	_, found, err := s.store.StackOf(rctx, rec.OrderID)
	switch {
	case err != nil:
		return Stack{}, false, nil
	case found:
		return s.answerStoredStack(ctx, rec)
	}
	return Stack{}, true, withFailedCode(orderConflict(rec.Codes[0], rec.OrderID, row.VoucherCode), rec.Codes[0])
}

// storedMember answers a stack request whose orderId is new to the store
// but one of whose other members' orderIds is not (known): the consumer
// refuses an event with a known member whole, so the stack could never be
// written. Such a row is usually a fence (RELEASED) that the settle or
// reconciliation wrote for a member of an earlier attempt of the order,
// after Redis lost that attempt's holds and claim: ORDER_RELEASED, as the
// fence answers a single's retry. Any other row is another order of that
// id: ORDER_CONFLICT with the member's code. A store that cannot answer
// leaves the decision to the gate's claim.
func (s *Service) storedMember(ctx context.Context, rec StackRecord) (Stack, bool, error) {
	for i := 1; i < len(rec.Codes); i++ {
		id := StackMemberOrderID(rec.OrderID, i+1)
		row, err := s.store.Order(ctx, id)
		switch {
		case IsCode(err, CodeReservationNotFound):
			continue
		case err != nil:
			return Stack{}, false, nil
		case row.Status == StatusReleased:
			return Stack{}, true, orderReleased(rec.OrderID)
		}
		return Stack{}, true, withFailedCode(orderConflict(rec.Codes[i], id, row.VoucherCode), rec.Codes[i])
	}
	return Stack{}, false, nil
}

// answerStoredStack answers rec against the store's stack of its orderId.
func (s *Service) answerStoredStack(ctx context.Context, rec StackRecord) (Stack, bool, error) {
	st, err := s.store.Stack(ctx, rec.OrderID)
	if err != nil {
		return Stack{}, true, err
	}
	if !storedStackIs(st, rec) {
		return Stack{}, true, Reject(CodeOrderConflict, "", Facts{Voucher: rec.Codes[0], OrderID: rec.OrderID})
	}
	if st.Status() == StatusReleased {
		return Stack{}, true, orderReleased(rec.OrderID)
	}
	st.Replay = true
	return st, true, nil
}

// storedStackIs reports whether the store's stack st is the request rec.
func storedStackIs(st Stack, rec StackRecord) bool {
	if st.CustomerID != rec.CustomerID || len(st.Items) != len(rec.Codes) {
		return false
	}
	for i, it := range st.Items {
		if it.Code != rec.Codes[i] {
			return false
		}
	}
	return true
}

// replayStackKafka answers a stack request whose orderId the gate has a
// claim of: another order's is ORDER_CONFLICT; the same request's is its
// replay, from the store once the consumer wrote it, else from the
// members' holds. While a member's hold is pending (the first request is
// waiting for Kafka), or the claim is young enough that its attempt may
// still be taking, it asks again for about a second, as a single's replay
// does, then answers 503 with the outcome unknown. A claim well past any
// produce whose members hold nothing in the gate (an attempt that died
// before its takes, or whose holds were fenced or lost with Redis's data)
// is answered at once, since waiting cannot change it: ORDER_RELEASED once
// the consumer has applied every acknowledged event and the stack is
// fenced in the store (fenceStrandedStack), else 503.
func (s *Service) replayStackKafka(ctx context.Context, w *kafkaWrites, rec StackRecord, owner OrderOwner) (Stack, error) {
	if owner.Stack == nil || !owner.Stack.Same(rec) {
		return Stack{}, Reject(CodeOrderConflict, "", Facts{Voucher: rec.Codes[0], OrderID: rec.OrderID, UsesVoucher: owner.Code})
	}
	for attempt := 0; ; attempt++ {
		if st, known, err := s.storedStackRead(ctx, rec); known {
			return st, err
		}
		st, state, err := s.stackFromHolds(ctx, w, *owner.Stack)
		stranded := state == stackAbsent && s.now().Sub(owner.Stack.At) >= w.orphanAge()
		switch {
		case err != nil:
			return Stack{}, outcomeUnknown(err, rec.OrderID)
		case state == stackHeld:
			st.Replay = true
			return st, nil
		case state == stackReleased:
			return Stack{}, orderReleased(rec.OrderID)
		case !stranded && attempt < pendingReplayPolls && sleepCtx(ctx, pendingReplayPoll) == nil:
			continue
		case stranded && w.events.CaughtUp(ctx) == nil:
			// An event acknowledged before CaughtUp was called is applied
			// by now: the store is read again for it.
			if st, known, err := s.storedStackRead(ctx, rec); known {
				return st, err
			}
			landed, err := s.fenceStrandedStack(ctx, *owner.Stack)
			switch {
			case err != nil:
				return Stack{}, outcomeUnknown(err, rec.OrderID)
			case landed:
				if st, known, err := s.storedStackRead(ctx, rec); known {
					return st, err
				}
				return Stack{}, &Error{Code: CodeUnavailable, OutcomeUnknown: true,
					Message: "order " + rec.OrderID + " is being written: retry with the same orderId"}
			}
			return Stack{}, Errorf(CodeOrderReleased,
				"order %s never reached the database and holds nothing; start a new attempt with a new orderId", rec.OrderID)
		}
		return Stack{}, &Error{Code: CodeUnavailable, OutcomeUnknown: true,
			Message: "order " + rec.OrderID + " is still being written and may or may not stand: retry with the same orderId"}
	}
}

// fenceStrandedStack fences a stranded claim's stack in the store before
// it is answered ORDER_RELEASED: a RELEASED row for its first member's
// orderId (Store.AbandonOrder), unless the store has a row of it. The
// consumer writes a stack whole or not at all and rejects one whose
// member's orderId it knows (applyStack), so an event of the claim still
// on its way (produced by an instance that resumes) then takes nothing,
// as a single's late event after fenceOrphan. landed reports a held row
// of the member found instead: the stack's event was applied meanwhile.
func (s *Service) fenceStrandedStack(ctx context.Context, rec StackRecord) (landed bool, err error) {
	rt := s.routeKnown(ctx, rec.Codes[0])
	h := Hold{OrderID: StackMemberOrderID(rec.OrderID, 1), CustomerID: rt.v.CustomerIDNormalization.Apply(rec.CustomerID),
		OrderAmount: rec.OrderAmount, DiscountAmount: rt.v.Discount().Compute(rec.OrderAmount), ReservedAt: rec.At,
		ExpiresAt: rec.At.Add(s.cfg.ReservationTTL), Code: rt.campaignCode}
	row, inserted, err := s.store.AbandonOrder(ctx, rt.gateCode(), h, s.now())
	switch {
	case err != nil:
		return false, err
	case inserted:
		s.log.WarnContext(ctx, "stranded stack claim fenced in the store", "orderId", rec.OrderID, "member", h.OrderID)
		return false, nil
	}
	return row.Status.Held(), nil
}

// storedStackRead is answerStoredStack when the store has a stack of
// rec's orderId; known is false when it has none or cannot answer.
func (s *Service) storedStackRead(ctx context.Context, rec StackRecord) (Stack, bool, error) {
	if _, found, err := s.store.StackOf(ctx, rec.OrderID); err != nil || !found {
		return Stack{}, false, nil
	}
	return s.answerStoredStack(ctx, rec)
}

// stackHolds is what the gate holds of a recorded stack.
type stackHolds int

const (
	// stackHeld: every member durably held (or confirmed).
	stackHeld stackHolds = iota
	// stackPending: some member pending, or missing while others are held.
	stackPending
	// stackReleased: some member released (or fenced).
	stackReleased
	// stackAbsent: no member held at all.
	stackAbsent
)

// stackFromHolds reads the members of rec in the gate and builds the
// stack they hold when every member is durably held.
func (s *Service) stackFromHolds(ctx context.Context, w *kafkaWrites, rec StackRecord) (Stack, stackHolds, error) {
	st := Stack{OrderID: rec.OrderID, CustomerID: rec.CustomerID, OrderAmount: rec.OrderAmount, CreatedAt: rec.At}
	missing, pending, released := 0, false, false
	for i, code := range rec.Codes {
		rt := s.routeKnown(ctx, code)
		orderID := StackMemberOrderID(rec.OrderID, i+1)
		h, found, err := w.gate.Lookup(ctx, rt.gateCode(), orderID)
		switch {
		case err != nil:
			return Stack{}, 0, err
		case !found:
			missing++
			continue
		case h.Released:
			released = true
		case h.Pending:
			pending = true
		}
		status := StatusReserved
		if h.Confirmed {
			status = StatusConfirmed
		}
		st.Items = append(st.Items, StackItem{Code: code, Redemption: holdRedemption(rt.gateCode(), h, status)})
	}
	switch {
	case released:
		return Stack{}, stackReleased, nil
	case missing == len(rec.Codes):
		return Stack{}, stackAbsent, nil
	case pending || missing > 0:
		return Stack{}, stackPending, nil
	}
	return st, stackHeld, nil
}

// kafkaStackRecord is, in Kafka mode, the gate's record of the stack
// orderID is the orderId of, or of one of whose members it is; nil in
// other modes, when the gate has none, or cannot be read (the store
// alone answers then).
func (s *Service) kafkaStackRecord(ctx context.Context, orderID string) *StackRecord {
	if _, ok := s.writes.(*kafkaWrites); !ok {
		return nil
	}
	owner, err := s.gate.OrderOwner(ctx, orderID)
	if err != nil {
		s.log.WarnContext(ctx, "the gate's claim of an orderId could not be read", "orderId", orderID, "err", err)
		return nil
	}
	return owner.Stack
}

// unwrittenStack answers, in Kafka mode, the stack orderID the store does
// not have (storeErr) from the gate: its record and its members' durable
// holds; storeErr otherwise.
func (s *Service) unwrittenStack(ctx context.Context, orderID string, storeErr error) (Stack, error) {
	rec := s.kafkaStackRecord(ctx, orderID)
	if rec == nil || rec.OrderID != orderID {
		return Stack{}, storeErr
	}
	st, state, err := s.stackFromHolds(ctx, s.writes.(*kafkaWrites), *rec)
	switch {
	case err != nil:
		return Stack{}, err
	case state == stackHeld:
		return st, nil
	}
	return Stack{}, storeErr
}

// applyUnwrittenStack writes, in Kafka mode, the stack orderID the
// consumer has not written yet, from the gate's record and its members'
// holds, with the consumer's own all-or-none apply (idempotent: the event
// arriving later changes nothing), so that a confirmation, release or
// extension can act on it. It reports whether there was one to write (the
// caller runs its store operation again). A member still pending is
// answered 503: its event may still be refused whole. A stack that
// replaces an order (rec.Replaces) releases it in the same transaction, as
// its event does, once the replaced order is in the store or the consumer
// has caught up (503 until then).
func (s *Service) applyUnwrittenStack(ctx context.Context, orderID string) (bool, error) {
	rec := s.kafkaStackRecord(ctx, orderID)
	if rec == nil || rec.OrderID != orderID {
		return false, nil
	}
	w := s.writes.(*kafkaWrites)
	if _, found, err := s.store.StackOf(ctx, orderID); err != nil || found {
		return found, err
	}
	takes := make([]stackTake, len(rec.Codes))
	for i, code := range rec.Codes {
		rt := s.routeKnown(ctx, code)
		h, found, err := w.gateHold(ctx, rt.gateCode(), "", StackMemberOrderID(orderID, i+1))
		switch {
		case errors.Is(err, errInStoreNow):
			return true, nil
		case err != nil:
			return false, err
		case !found || h.Released:
			return false, nil
		case h.Pending:
			return false, Unavailable(nil, "order %s is still being written; retry", orderID)
		}
		takes[i] = stackTake{rt: rt, hold: h}
	}
	if rec.Replaces != "" {
		// Written before the replaced order's own event, the stack would
		// take second uses of the codes it keeps.
		if err := w.replacedInStore(ctx, orderID, rec.Replaces); err != nil {
			return false, err
		}
	}
	results, err := s.store.ApplyReserved(ctx, []ReservedEvent{stackEvent(*rec, takes)})
	if err != nil {
		return false, err
	}
	if len(results) == 1 && results[0].Outcome == Rejected {
		return false, Errorf(CodeInternal, "the database rejected order %s: %s", orderID, results[0].Reason)
	}
	return true, nil
}

// kafkaStackPart reports, in Kafka mode, the stack orderID belongs to
// (its own or a member's orderId) from the gate's record; "" for none.
func (s *Service) kafkaStackPart(ctx context.Context, orderID string) string {
	if rec := s.kafkaStackRecord(ctx, orderID); rec != nil {
		return rec.OrderID
	}
	return ""
}

// confirmedStack marks, in Kafka mode, the members of st the store
// confirmed as confirmed in the gate (as afterConfirm does for a single),
// so that reconciliation finds nothing to repair.
func (s *Service) confirmedStack(ctx context.Context, st Stack) {
	w, ok := s.writes.(*kafkaWrites)
	if !ok {
		return
	}
	for _, it := range st.Items {
		if rt := s.routeKnown(ctx, it.Code); rt.v.FlashSale {
			w.afterConfirm(ctx, rt, it.Redemption.OrderID)
		}
	}
}

// beforeConfirmStack marks, in Kafka mode, each member of the stack
// orderID confirmed in the gate before the store confirms it (beforeConfirm,
// in code order, as a replacement moves them): a replacement is decided
// in the gate, and its event written later, so the gate must know a
// confirmation from the moment it is under way. A member a replacement
// moved first (or a transit hold took over) is released in the gate:
// RESERVATION_RELEASED. The members are the store's stack, else the gate's
// record; neither: nothing to mark (the store answers).
func (s *Service) beforeConfirmStack(ctx context.Context, orderID string) error {
	w, ok := s.writes.(*kafkaWrites)
	if !ok {
		return nil
	}
	var codes []string
	if st, err := s.store.Stack(ctx, orderID); err == nil {
		for _, it := range st.Items {
			codes = append(codes, it.Code)
		}
	} else if !IsCode(err, CodeReservationNotFound) {
		return err
	} else if rec := s.kafkaStackRecord(ctx, orderID); rec != nil && rec.OrderID == orderID {
		codes = rec.Codes
	}
	members := make([]stackReplaced, 0, len(codes))
	for i, code := range codes {
		if rt := s.routeKnown(ctx, code); rt.v.FlashSale {
			members = append(members, stackReplaced{rt: rt, orderID: StackMemberOrderID(orderID, i+1)})
		}
	}
	sort.Slice(members, func(a, b int) bool { return members[a].rt.gateCode() < members[b].rt.gateCode() })
	for _, m := range members {
		if _, err := w.beforeConfirm(ctx, m.rt, m.orderID); err != nil {
			return err
		}
	}
	return nil
}

// stackWrite runs op, a store operation on the stack orderID; in Kafka
// mode a stack the store does not have yet is written from the gate first
// (applyUnwrittenStack) and op run again.
func (s *Service) stackWrite(ctx context.Context, orderID string, op func() (Stack, error)) (Stack, error) {
	st, err := op()
	if !IsCode(err, CodeReservationNotFound) {
		return st, err
	}
	applied, aerr := s.applyUnwrittenStack(ctx, orderID)
	if aerr != nil {
		return Stack{}, aerr
	}
	if !applied {
		return st, err
	}
	return op()
}
