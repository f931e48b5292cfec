package voucher

import (
	"context"
	"sort"
	"time"
)

// stackTake is one code of a flash stack on its way through the gate.
type stackTake struct {
	rt   route
	hold Hold
	// taken: this attempt took the hold's use (GateTaken); a member the
	// gate already held (GateReplay) belongs to an earlier attempt.
	taken bool
}

// stackSyncOrder is a stack on its way through reserveStackSync (or
// reserveStackKafka): the request, each code's route, and for a replacement the replaced order's
// members and the TTL replacementUntil bounds (else the reservation TTL).
type stackSyncOrder struct {
	req      StackRequest
	rts      []route
	replaced []stackReplaced
	ttl      time.Duration
}

// reserveStackSync reserves a stack of flash vouchers in flash-sync mode.
// The codes' keys live in different hash slots, so no one script covers
// them: the gate takes each member's use in code order (the same order for
// every stack, as the store's locks), and at the first refusal gives back
// what this attempt took, before answering. Once the gate holds every
// member, the store writes the stack as in standard mode (ReserveStack,
// which checks every limit again); a refusal there gives the uses back
// too, and an unknown outcome leaves them to the settle of the mode
// (syncWrites.settleUnknown fences each member). A member the gate already
// holds for the orderId (a retry, or a concurrent copy of the request) is
// written by the store's write, which is idempotent by orderId. An
// instance that dies between two takes leaves holds that no row backs;
// the liveness mechanism fences and gives them back (docs/stacks.md).
//
// A replacement (o.replaced) moves the use of a flash code in both orders
// from the replaced member to the new one in one script (Gate.Replace), so
// no other order can take it in between, and the move is undone
// (Gate.Unreplace) wherever a take is given back; a replaced flash code
// the new order does not keep is given back in the gate once the store
// has released it. gaveBack counts the uses given back before answering.
func (s *Service) reserveStackSync(ctx context.Context, fp *flashPath, w *syncWrites, o stackSyncOrder, now time.Time, gaveBack *int) (Stack, error) {
	req, rts := o.req, o.rts
	if err := s.stackEligible(ctx, req, rts, now); err != nil {
		return Stack{}, err
	}
	at := now.Truncate(time.Millisecond)
	takes := make([]stackTake, len(rts))
	kept := make([]bool, len(o.replaced))
	left := req.OrderAmount
	for i, rt := range rts {
		d := rt.v.Discount().Compute(left)
		takes[i] = stackTake{rt: rt, hold: Hold{
			OrderID: StackMemberOrderID(req.OrderID, i+1), CustomerID: req.Customers[i], OrderAmount: left,
			DiscountAmount: d, ReservedAt: at, ExpiresAt: at.Add(o.ttl), Owner: s.cfg.Instance,
			HeldSince: req.HeldSince, Budget: Budget{Amount: rt.v.Budget.Amount, Clip: rt.v.Budget.Clip},
			Window: req.Windows[i], WindowLimit: rt.v.WindowLimit,
		}}
		for j, m := range o.replaced {
			if rt.v.FlashSale && m.rt.v.FlashSale && m.rt.gateCode() == rt.gateCode() {
				takes[i].hold.Replaces, kept[j] = m.orderID, true
			}
		}
		left -= d
	}
	order := make([]int, len(takes))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return takes[order[a]].rt.gateCode() < takes[order[b]].rt.gateCode() })
	for _, i := range order {
		t := &takes[i]
		if !t.rt.v.FlashSale {
			// A standard voucher's use is taken by the store's write alone.
			continue
		}
		if err := s.takeStackMember(ctx, fp, t, req, now); err != nil {
			*gaveBack += s.untakeStack(ctx, takes)
			if IsCode(err, CodeReplacedOrderNotHeld) {
				// About the replaced order, not the code (as the store answers it).
				return Stack{}, err
			}
			return Stack{}, withFailedCode(err, t.rt.code)
		}
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	st, err := s.store.ReserveStack(wctx, req, s.now(), o.ttl)
	switch {
	case err == nil:
		for i, it := range st.Items {
			w.settled(takes[i].rt.gateCode(), takes[i].hold.OrderID)
			s.stackRediscount(wctx, takes[i], it.Redemption.DiscountAmount)
		}
		for j, m := range o.replaced {
			if m.rt.v.FlashSale && !kept[j] {
				m.rt.path.released(wctx, m.rt, m.orderID)
			}
		}
		return st, nil
	case IsOutcomeUnknown(err):
		w.mu.Lock()
		for _, t := range takes {
			if t.taken {
				w.unsettled[orderKey{t.rt.gateCode(), t.hold.OrderID}] = unsettledWrite{hold: t.hold, since: s.now()}
			}
		}
		for j, m := range o.replaced {
			if m.rt.v.FlashSale && !kept[j] {
				w.unsettled[orderKey{m.rt.gateCode(), m.orderID}] = unsettledWrite{hold: Hold{OrderID: m.orderID}, since: s.now(), replaced: true}
			}
		}
		w.mu.Unlock()
		s.log.WarnContext(ctx, "stack write outcome unknown; uses kept in the gate until settled", "orderId", req.OrderID, "err", err)
		return Stack{}, err
	}
	*gaveBack += s.giveBackStack(ctx, takes, err)
	return Stack{}, err
}

// takeStackMember takes t's use in the gate (Gate.Replace when it takes
// over a replaced member's, t.hold.Replaces), warming the voucher up when
// it is not loaded; it answers the refusal of the code otherwise.
func (s *Service) takeStackMember(ctx context.Context, fp *flashPath, t *stackTake, req StackRequest, now time.Time) error {
	code := t.rt.gateCode()
	for attempt := 0; ; attempt++ {
		var dec GateDecision
		var err error
		if t.hold.Replaces != "" {
			dec, err = s.gate.Replace(ctx, code, t.hold, t.hold.Replaces)
		} else {
			dec, err = s.gate.Reserve(ctx, code, t.rt.v.PerUserLimit, t.hold)
		}
		if err != nil {
			if !s.unansweredTake(ctx, code, t.hold, err) {
				return outcomeUnknown(err, req.OrderID)
			}
			return err
		}
		s.obs.GateDecided(dec.Outcome)
		switch dec.Outcome {
		case GateTaken:
			if dec.Discount > 0 {
				t.hold.DiscountAmount = dec.Discount
			}
			t.taken = true
			return nil
		case GateReplay:
			return nil
		case GateReleased:
			if w, ok := fp.writes.(*syncWrites); ok {
				return s.releasedMember(ctx, w, t, req)
			}
			return orderReleased(req.OrderID)
		case GateNotLoaded:
			if attempt >= notLoadedWarmups {
				return Unavailable(nil, "flash voucher %s is not in Redis yet", t.rt.code)
			}
			if _, err := fp.loader.warmup(ctx, code); err != nil && !IsCode(err, CodeUnavailable) {
				return err
			}
		default:
			return fp.refusal(ctx, t.rt, gateOrder{customerID: t.hold.CustomerID, orderID: req.OrderID, replaces: req.ReplacesOrderID}, dec, now)
		}
	}
}

// releasedMember answers, in flash-sync mode, a stack request one of whose
// members' orderIds the gate marks released. The store answers, as for a
// single (syncWrites.releasedOrder): the mark runs ahead of it, and a
// replacement of the customer's CONFIRMED stack marks its members there
// until it is undone. A stack of the orderId in the store is errKnownStack
// (the store's ReserveStack answers it, writing nothing: its replay,
// ORDER_CONFLICT or ORDER_RELEASED); a member's orderId that the store
// holds as a single reservation of the customer's (the stack's own
// orderId, its first member's) is ORDER_CONFLICT, as the store's write
// answers it; else the row's answer (ORDER_RELEASED, ORDER_CONFLICT). A
// store that does not answer gives its error: nothing was taken for the
// member.
func (s *Service) releasedMember(ctx context.Context, w *syncWrites, t *stackTake, req StackRequest) error {
	stack, found, err := s.store.StackOf(ctx, req.OrderID)
	switch {
	case err != nil:
		return err
	case found && stack == req.OrderID:
		return errKnownStack
	case found:
		// A member's orderId sent as a stack's.
		return orderConflict(t.rt.code, req.OrderID, "")
	}
	if _, err := w.releasedOrder(ctx, t.rt.code, t.hold.OrderID, t.hold.CustomerID); err != nil {
		if IsCode(err, CodeOrderReleased) {
			return orderReleased(req.OrderID)
		}
		return err
	}
	return orderConflict(t.rt.code, req.OrderID, "")
}

// untakeStack gives back, in reverse code order, the uses this attempt
// took before a later code was refused (the refusal of a stack under
// load, so it logs nothing): a use taken over from a replaced member goes
// back to it (Gate.Unreplace), any other to the voucher. A give-back the
// gate does not answer is remembered and settled when it answers again,
// as compensate does. It returns the number of uses it gave back (or left
// to be settled).
func (s *Service) untakeStack(ctx context.Context, takes []stackTake) int {
	cctx, cancel := s.writeContext(ctx)
	defer cancel()
	n := 0
	for i := len(takes) - 1; i >= 0; i-- {
		t := takes[i]
		if !t.taken {
			continue
		}
		n++
		var err error
		if t.hold.Replaces != "" {
			_, err = s.gate.Unreplace(cctx, t.rt.gateCode(), t.hold.OrderID, t.hold.Replaces)
		} else {
			_, err = s.gate.Release(cctx, t.rt.gateCode(), t.hold.OrderID, ReleaseForget)
		}
		if err != nil {
			s.log.ErrorContext(ctx, "could not give a stack's use back to the gate", "code", t.rt.code, "orderId", t.hold.OrderID, "err", err)
			s.unanswered.remember(t.rt.gateCode(), t.hold, s.now())
		}
	}
	return n
}

// giveBackStack gives back, in reverse code order, the uses this attempt
// took after the store refused the stack (giveBack: a use taken over from
// a replaced member goes back to it; a give-back the gate does not answer
// is settled when it answers again); it returns the number of uses.
func (s *Service) giveBackStack(ctx context.Context, takes []stackTake, cause error) int {
	n := 0
	for i := len(takes) - 1; i >= 0; i-- {
		if t := takes[i]; t.taken {
			s.giveBack(ctx, ModeFlashSync, t.rt.gateCode(), t.hold, cause)
			n++
		}
	}
	return n
}

// stackRediscount gives the gate's hold of t the discount the store gave
// its member when they differ (a money budget clipped an earlier code, or
// this one, in one of them), so that the gate's budget gives back what the
// store holds. One script (Gate.Rediscount): the use stays held.
func (s *Service) stackRediscount(ctx context.Context, t stackTake, discount int64) {
	if t.rt.v.Budget.Amount == 0 || discount == t.hold.DiscountAmount || !t.taken {
		return
	}
	code := t.rt.gateCode()
	if _, err := s.gate.Rediscount(ctx, code, t.hold.OrderID, discount); err != nil {
		s.log.WarnContext(ctx, "budget: the gate's hold keeps its discount; reconciliation reports the drift", "code", code,
			"orderId", t.hold.OrderID, "err", err)
	}
}

// releasedStack gives the gate back the members of st the store released,
// as the per-code paths do after the store (flashPath.released).
func (s *Service) releasedStack(ctx context.Context, st Stack) {
	for _, it := range st.Items {
		if it.Redemption.Status != StatusReleased {
			continue
		}
		rt := s.routeKnown(ctx, it.Code)
		rt.path.released(ctx, rt, it.Redemption.OrderID)
	}
}

// extendedStack records the members' new expiry in the gate's copies of
// their holds, as the per-code extension does (flashPath.extend).
func (s *Service) extendedStack(ctx context.Context, st Stack) {
	if s.gate == nil {
		return
	}
	for _, it := range st.Items {
		rt := s.routeKnown(ctx, it.Code)
		if !rt.v.FlashSale {
			continue
		}
		if _, err := s.gate.Extend(ctx, rt.gateCode(), it.Redemption.OrderID, it.Redemption.ExpiresAt); err != nil {
			s.log.WarnContext(ctx, "extended in the database but not in the gate; replays answer the old expiresAt",
				"code", it.Code, "orderId", it.Redemption.OrderID, "err", err)
		}
	}
}

// stackEligible checks each flash code's eligibility on the definition
// before the gate is asked, as the per-code flash path does, so that an
// ineligible code takes nothing anywhere. A known stack's orderId is
// answered by the store first (its replay, ORDER_CONFLICT or
// ORDER_RELEASED, writing nothing), as a known orderId is answered before
// eligibility.
func (s *Service) stackEligible(ctx context.Context, req StackRequest, rts []route, now time.Time) error {
	left := req.OrderAmount
	for i, rt := range rts {
		p := Purchase{Amount: left, CustomerID: req.Customers[i], Currency: req.Currency}
		if err := rt.v.CheckEligible(p, now); err != nil && rt.v.FlashSale {
			if _, found, serr := s.store.StackOf(ctx, req.OrderID); serr != nil || found {
				if serr != nil {
					return serr
				}
				return errKnownStack
			}
			return withFailedCode(err, rt.code)
		}
		left -= rt.v.Discount().Compute(left)
	}
	return nil
}
