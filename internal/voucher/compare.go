package voucher

import (
	"context"
	"time"
)

// comparison is one reconciliation's walk over a voucher, chunk by chunk:
// the store's held rows, each page looked up in the gate after it was read
// (walkStore), then the gate's orders, each chunk looked up in the store
// after it was read (walkGate). With repair set, each chunk's findings are
// repaired before the next chunk is read. It keeps one chunk, the capped
// lists of the report and the counts, never the whole voucher
// (docs/rules.md, "Reconciliation reads in chunks"). Not safe for
// concurrent use.
type comparison struct {
	s      *Service
	code   string
	grace  time.Duration
	repair bool
	pace   pacer
	// limit is the most orderIds the report names per kind of finding.
	limit int
	// named holds the orderIds the report's lists name (at most limit per
	// kind), so that no list names an order twice and no order is named in
	// two lists.
	named map[string]bool
	// holding counts the orders walkGate read holding a use (the report's
	// held count of a voucher whose gate keeps no count; an order the
	// scan returns twice is counted twice).
	holding int64
	// rows sums what the store's walk read, for the check of the store's
	// counters against its rows.
	rows rowSums
}

// rowSums is what the store's walk read: the held rows, their discounts
// and their uses per occurrence, and whether a row may have been read
// twice (confirmed after the walk began).
type rowSums struct {
	count    int64
	discount int64
	windows  map[time.Time]int64
	// since is the walk's start less confirmSkew: a CONFIRMED row updated
	// after it may have been read RESERVED before too.
	since time.Time
	// moved is set when a CONFIRMED row was updated after since.
	moved bool
}

// confirmSkew is how far behind this instance's clock another instance's
// may be when it stamps a confirmation (updated_at): a row confirmed at
// most this long before the store's walk began counts as confirmed under
// it.
const confirmSkew = time.Minute

func (r *rowSums) add(row Redemption) {
	r.count++
	r.discount += row.DiscountAmount
	if !row.Window.IsZero() {
		if r.windows == nil {
			r.windows = map[time.Time]int64{}
		}
		r.windows[row.Window.UTC()]++
	}
	if row.Status == StatusConfirmed && !row.UpdatedAt.Before(r.since) {
		r.moved = true
	}
}

// note counts one finding of a kind and names it in the kind's list while
// the list has room and the order is not named yet; a finding left out
// marks the report truncated.
func (c *comparison) note(rep *ReconcileReport, list *[]string, count *int64, id string) {
	*count++
	if c.named[id] {
		return
	}
	if len(*list) >= c.limit {
		rep.Truncated = true
		return
	}
	c.named[id] = true
	*list = append(*list, id)
}

// walkStore reads the store's held rows in pages (RESERVED, then
// CONFIRMED) and looks each page up in the gate after it was read: a row
// held at its read whose orderId the gate does not know afterwards is
// missing, and adopted at once when repairing. An orderId the gate knows
// then, in any state, was not lost at that read: the gate took it before
// its row was written and forgets an orderId only when its write failed
// (no row) or as an orphan (no row); or another pass adopted it
// meanwhile. One exception: in Kafka mode a CONFIRMED row whose orderId the
// gate marks released is missing too. The gate releases an order before
// the store does only for a replacement, whose event the consumer applies
// as a new use when the replaced order is CONFIRMED, keeping it; a
// confirmation refused by the gate's mark never reaches the store. So the
// row keeps its use, and the gate must count it. It sums the rows it reads
// (c.rows).
func (c *comparison) walkStore(ctx context.Context, rep *ReconcileReport) error {
	limit := c.s.cfg.ReconcileChunk
	c.rows.since = c.s.now().Add(-confirmSkew)
	for _, st := range []Status{StatusReserved, StatusConfirmed} {
		var after PageKey
		for {
			if err := c.pace.wait(ctx); err != nil {
				return err
			}
			rows, err := c.s.store.HeldPage(ctx, c.code, st, after, limit)
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				break
			}
			last := rows[len(rows)-1]
			after = PageKey{CreatedAt: last.CreatedAt, OrderID: last.OrderID}
			ids := make([]string, len(rows))
			for i, r := range rows {
				ids[i] = r.OrderID
				c.rows.add(r)
			}
			known, err := c.s.gate.Known(ctx, c.code, ids)
			if err != nil {
				return err
			}
			for i, r := range rows {
				released := known[i] == GateOrderReleased && r.Status == StatusConfirmed && c.s.writes.tracksConfirmation()
				if known[i] != GateOrderUnknown && !released {
					continue
				}
				c.note(rep, &rep.Missing, &rep.Found.Missing, r.OrderID)
				if c.repair {
					if err := c.adopt(ctx, rep, r, released); err != nil {
						return err
					}
				}
			}
			c.pace.worked()
			if len(rows) < limit {
				break
			}
		}
	}
	return nil
}

// adopt gives the gate a held row it lost, or (released) a confirmed row
// it marks released; adopt.lua takes a use only while the orderId is still
// in that state in the gate (the gate hands out less).
func (c *comparison) adopt(ctx context.Context, rep *ReconcileReport, r Redemption, released bool) error {
	h := Hold{OrderID: r.OrderID, CustomerID: r.CustomerID, OrderAmount: r.OrderAmount,
		DiscountAmount: r.DiscountAmount, ReservedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		Confirmed: r.Status == StatusConfirmed, Code: campaignCodeOf(r.VoucherCode, Voucher{Code: c.code}), Window: r.Window}
	if r.HeldSince.Before(r.CreatedAt) {
		h.HeldSince = r.HeldSince
	}
	rep.Repaired = true
	var err error
	if released {
		_, err = c.s.gate.AdoptReleased(ctx, c.code, h)
	} else {
		_, err = c.s.gate.Adopt(ctx, c.code, h)
	}
	return err
}

// gateChunk is what walkGate found in one chunk of the gate's orders, by
// kind, with each order's hold for its repair.
type gateChunk struct {
	inFlight, orphans, stale, uncommitted, unconfirmed []Hold
}

// walkGate reads the gate's orders in chunks and classifies each order
// holding a use against its row, read after the chunk: no row (in flight
// while younger than the grace period, abandoned when its instance is
// gone, else an orphan unless left to its writer: leaveToWriters), a
// RELEASED row (stale), a pending hold with a row
// (uncommitted), a CONFIRMED row the gate does not mark (unconfirmed).
// When repairing, each chunk's findings are repaired before the next chunk
// is read.
func (c *comparison) walkGate(ctx context.Context, rep *ReconcileReport) error {
	var cursor uint64
	for first := true; first || cursor != 0; first = false {
		if err := c.pace.wait(ctx); err != nil {
			return err
		}
		holds, next, err := c.s.gate.ScanOrders(ctx, c.code, cursor)
		if err != nil {
			return err
		}
		cursor = next
		ids := make([]string, 0, len(holds))
		for _, h := range holds {
			if !h.Released {
				c.holding++
				ids = append(ids, h.OrderID)
			}
		}
		if len(ids) == 0 {
			c.pace.worked()
			continue
		}
		rows, err := c.s.store.RedemptionsAmong(ctx, c.code, ids)
		if err != nil {
			return err
		}
		byID := make(map[string]Redemption, len(rows))
		for _, r := range rows {
			byID[r.OrderID] = r
		}
		var ch gateChunk
		now := c.s.now()
		for _, h := range holds {
			if !h.Released {
				c.classify(&ch, h, byID, now)
			}
		}
		if err := c.record(ctx, rep, ch); err != nil {
			return err
		}
		c.pace.worked()
	}
	return nil
}

// classify adds a gate hold to the chunk's list it belongs to, none when
// its row agrees with it.
func (c *comparison) classify(ch *gateChunk, h Hold, rows map[string]Redemption, now time.Time) {
	row, ok := rows[h.OrderID]
	switch {
	case !ok && now.Sub(h.ReservedAt) < c.grace:
		ch.inFlight = append(ch.inFlight, h)
	case !ok:
		ch.orphans = append(ch.orphans, h)
	case row.Status == StatusReleased:
		ch.stale = append(ch.stale, h)
	case h.Pending:
		ch.uncommitted = append(ch.uncommitted, h)
	case row.Status == StatusConfirmed && !h.Confirmed && c.s.writes.tracksConfirmation():
		ch.unconfirmed = append(ch.unconfirmed, h)
	}
}

// record counts and names one chunk's findings, tells the abandoned holds
// from those in flight and the orphans from the holds left to their
// writers (reported in flight), and repairs the chunk when repairing:
// commits and confirmations first, then stale holds, then orphans and
// abandoned holds (in Kafka mode only once the consumer has caught up with
// this chunk's reads: a hold without a row may still be an event in the
// topic).
func (c *comparison) record(ctx context.Context, rep *ReconcileReport, ch gateChunk) error {
	alive, read := c.s.ownersAlive(ctx, c.code, c.s.otherOwners(ch.inFlight, ch.orphans))
	inFlight, abandoned := c.s.findAbandoned(ch.inFlight, alive, read)
	orphans, waiting := c.s.leaveToWriters(c.code, ch.orphans, alive, c.s.now(), c.grace)
	inFlight = append(inFlight, waiting...)
	for _, l := range []struct {
		holds []Hold
		list  *[]string
		count *int64
	}{
		{inFlight, &rep.InFlight, &rep.Found.InFlight},
		{abandoned, &rep.Abandoned, &rep.Found.Abandoned},
		{orphans, &rep.Orphans, &rep.Found.Orphans},
		{ch.stale, &rep.Stale, &rep.Found.Stale},
		{ch.uncommitted, &rep.Uncommitted, &rep.Found.Uncommitted},
		{ch.unconfirmed, &rep.Unconfirmed, &rep.Found.Unconfirmed},
	} {
		for _, h := range l.holds {
			c.note(rep, l.list, l.count, h.OrderID)
		}
	}
	if !c.repair {
		return nil
	}
	s := c.s
	if len(ch.uncommitted)+len(ch.unconfirmed)+len(ch.stale)+len(orphans)+len(abandoned) > 0 {
		rep.Repaired = true
	}
	for _, h := range ch.uncommitted {
		if _, err := s.gate.Commit(ctx, c.code, h); err != nil {
			return err
		}
	}
	for _, h := range ch.unconfirmed {
		if _, err := s.gate.Confirm(ctx, c.code, h.OrderID, h.Code); err != nil {
			return err
		}
	}
	for _, h := range ch.stale {
		if _, err := s.gate.Release(ctx, c.code, h.OrderID, ReleaseMark); err != nil {
			return err
		}
	}
	if len(orphans) == 0 && len(abandoned) == 0 {
		return nil
	}
	if err := s.writes.caughtUp(ctx); err != nil {
		if rep.Skipped == "" {
			rep.Skipped = "orphan holds kept: " + err.Error()
		}
		return nil
	}
	for _, h := range orphans {
		if err := s.writes.giveBackOrphan(ctx, c.code, h); err != nil {
			return err
		}
	}
	for _, h := range abandoned {
		if _, err := s.fenceHold(ctx, c.code, h); err != nil {
			return err
		}
	}
	return nil
}

// pacer keeps a walk to a share of its time: wait, before each chunk but
// the first, pauses for as long as the work since the last pause took
// times (1 - share) / share. A share of 0, or 1 and above, never pauses.
type pacer struct {
	// ratio is (1 - share) / share; 0 never pauses.
	ratio float64
	// since is when the work of the current chunk began (zero before the
	// first chunk).
	since time.Time
	// owed is the pause the work done so far asks for.
	owed time.Duration
}

func newPacer(share float64) pacer {
	if share <= 0 || share >= 1 {
		return pacer{}
	}
	return pacer{ratio: (1 - share) / share}
}

// wait pauses for what the chunks since the last pause owe, then starts
// timing the next chunk. It returns ctx's error when ctx ends meanwhile.
func (p *pacer) wait(ctx context.Context) error {
	if p.ratio > 0 && p.owed > 0 {
		t := time.NewTimer(p.owed)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		p.owed = 0
	}
	p.since = time.Now()
	return nil
}

// worked ends the timing of a chunk begun by wait.
func (p *pacer) worked() {
	if p.ratio > 0 && !p.since.IsZero() {
		p.owed += time.Duration(float64(time.Since(p.since)) * p.ratio)
	}
}
