package voucher

import (
	"context"
	"time"
)

// comparison is one reconciliation's walk over a voucher, chunk by chunk:
// the gate's orders, each chunk looked up in the store after it was read
// (walkGate), then the store's held rows, each page looked up in the gate
// after it was read (walkStore). It keeps one chunk and the findings, never
// the whole voucher (docs/rules.md, "Reconciliation reads in chunks").
// Not safe for concurrent use.
type comparison struct {
	s     *Service
	code  string
	grace time.Duration
	pace  pacer
	// found keeps the gate's hold of every order a finding of walkGate
	// names (in flight, orphan, stale, uncommitted, unconfirmed), for
	// findAbandoned and the repairs; an order is classified once even
	// when the gate's scan returns it twice.
	found map[string]Hold
	// missing keeps the row of every order walkStore reports missing, for
	// its adoption.
	missing map[string]Redemption
	// holding counts the orders walkGate read holding a use (the report's
	// held count of a voucher whose gate keeps no count; an order the
	// scan returns twice is counted twice).
	holding int64
}

// walkGate reads the gate's orders in chunks and classifies each order
// holding a use against its row, read after the chunk: no row (in flight
// while younger than the grace period, else an orphan), a RELEASED row
// (stale), a pending hold with a row (uncommitted), a CONFIRMED row the
// gate does not mark (unconfirmed).
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
		now := c.s.now()
		for _, h := range holds {
			if _, seen := c.found[h.OrderID]; seen || h.Released {
				continue
			}
			if l := c.classify(rep, h, byID, now); l != nil {
				*l = append(*l, h.OrderID)
				c.found[h.OrderID] = h
			}
		}
		c.pace.worked()
	}
	return nil
}

// classify returns the list of rep a gate hold belongs to, nil when its row
// agrees with it.
func (c *comparison) classify(rep *ReconcileReport, h Hold, rows map[string]Redemption, now time.Time) *[]string {
	row, ok := rows[h.OrderID]
	switch {
	case !ok && now.Sub(h.ReservedAt) < c.grace:
		return &rep.InFlight
	case !ok:
		return &rep.Orphans
	case row.Status == StatusReleased:
		return &rep.Stale
	case h.Pending:
		return &rep.Uncommitted
	case row.Status == StatusConfirmed && !h.Confirmed && c.s.writes.tracksConfirmation():
		return &rep.Unconfirmed
	}
	return nil
}

// walkStore reads the store's held rows in pages (RESERVED, then
// CONFIRMED) and looks each page up in the gate after it was read: a row
// held at its read whose orderId the gate does not know afterwards is
// missing. An orderId the gate knows then, in any state, was not lost at
// that read: the gate took it before its row was written and forgets an
// orderId only when its write failed (no row) or as an orphan (no row); or
// another pass adopted it meanwhile.
func (c *comparison) walkStore(ctx context.Context, rep *ReconcileReport) error {
	limit := c.s.cfg.ReconcileChunk
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
			}
			known, err := c.s.gate.Known(ctx, c.code, ids)
			if err != nil {
				return err
			}
			for i, r := range rows {
				if known[i] {
					continue
				}
				if _, dup := c.missing[r.OrderID]; dup {
					continue
				}
				if c.missing == nil {
					c.missing = map[string]Redemption{}
				}
				c.missing[r.OrderID] = r
				rep.Missing = append(rep.Missing, r.OrderID)
			}
			c.pace.worked()
			if len(rows) < limit {
				break
			}
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
