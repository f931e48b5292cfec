package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Applier writes events to the store; in production it is the store's
// ApplyReserved. It must be idempotent (a known orderId changes nothing)
// and return one result per event, in order. An error means nothing can be
// assumed about the batch: the consumer retries all of it.
type Applier interface {
	ApplyReserved(ctx context.Context, events []voucher.ReservedEvent) ([]voucher.ApplyResult, error)
}

// ApplierFunc adapts a function to Applier.
type ApplierFunc func(ctx context.Context, events []voucher.ReservedEvent) ([]voucher.ApplyResult, error)

// ApplyReserved calls f.
func (f ApplierFunc) ApplyReserved(ctx context.Context, events []voucher.ReservedEvent) ([]voucher.ApplyResult, error) {
	return f(ctx, events)
}

// EventCheck checks events against what the consumer can recompute
// (voucher.EventChecker): one verdict per event, in order, an empty Reason
// for an event to apply.
type EventCheck interface {
	Check(ctx context.Context, events []voucher.ReservedEvent) ([]voucher.EventMismatch, error)
}

// Stats counts what a Consumer did since it was created, for metrics.
type Stats struct {
	Batches        uint64 // batches applied and committed
	Applied        uint64 // events inserted by the store
	AlreadyApplied uint64 // events the store already had (replays)
	Rejected       uint64 // events the store refused, sent to the dead-letter topic
	Undecodable    uint64 // records that were not events, sent to the dead-letter topic
	Failures       uint64 // failed attempts (store, dead letters or commit); each is retried

	// Mismatched counts the events Config.Check refused, and records
	// without a valid signature (MismatchSignature), sent to the
	// dead-letter topic, by reason (a copy).
	Mismatched map[string]uint64
}

// batchResult is what one runOnce did.
type batchResult struct {
	Polled         int  // records polled
	Applied        int  // events inserted
	AlreadyApplied int  // events already in the store
	Rejected       int  // events dead-lettered because the store refused them
	Undecodable    int  // records dead-lettered because they are not events
	Committed      bool // offsets committed

	// Mismatched counts the records dead-lettered because Config.Check
	// refused their events or their signature is not valid, by reason; nil
	// when none.
	Mismatched map[string]int
}

// Consumer applies the topic's events to the store as the writer group. It
// commits a batch's offsets only after the store has committed it and its
// dead letters are acknowledged; a failed batch is rewound and retried after
// a backoff, so no event is lost or skipped. Start runs it in the
// background; Stop finishes the batch in hand, commits and leaves the group.
type Consumer struct {
	cfg     Config
	applier Applier
	cl      *kgo.Client

	// quit ends polling: it is cancelled by Stop.
	quit       context.Context
	quitCancel context.CancelFunc

	startOnce sync.Once
	stopOnce  sync.Once
	done      chan struct{} // closed when the loop started by Start returns

	batches, applied, alreadyApplied, rejected, undecodable, failures atomic.Uint64

	mismatchMu sync.Mutex
	mismatched map[string]uint64 // guarded by mismatchMu
}

// NewConsumer returns a consumer of cfg.Topic in cfg.Group that applies
// events with applier. It joins the group on the first poll.
func NewConsumer(cfg Config, applier Applier) (*Consumer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if applier == nil {
		return nil, errors.New("kafkalog: NewConsumer needs an Applier")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.ConsumerGroup(cfg.Group),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(cfg.SessionTimeout / 5),
		kgo.ConsumeTopics(cfg.Topic),
		// A new group must start from the oldest event, not the newest: a
		// group created after events were published still applies them.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMinBytes(cfg.FetchMinBytes),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		// Offsets are committed by hand, after the store has committed.
		kgo.DisableAutoCommit(),
		// No partition is revoked while a batch is in hand: a rebalance
		// waits until the batch is committed (or rewound).
		kgo.BlockRebalanceOnPoll(),
		// The same client writes the dead letters.
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}, append(cfg.securityOpts(), cfg.ClientOpts...)...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: %w", err)
	}
	quit, cancel := context.WithCancel(context.Background())
	return &Consumer{
		cfg: cfg, applier: applier, cl: cl,
		quit: quit, quitCancel: cancel,
		done: make(chan struct{}), mismatched: map[string]uint64{},
	}, nil
}

// Start runs the consumer in the background until Stop is called or ctx
// ends. A batch in hand when that happens is still applied and committed,
// within Config.BatchTimeout.
func (c *Consumer) Start(ctx context.Context) {
	c.startOnce.Do(func() {
		stop := context.AfterFunc(ctx, c.quitCancel)
		go func() {
			defer close(c.done)
			defer stop()
			c.run(context.WithoutCancel(ctx))
		}()
	})
}

// Stop stops polling, waits for the batch in hand to be applied and
// committed, leaves the group and closes the client. It is safe to call
// more than once, and without Start.
func (c *Consumer) Stop() {
	c.stopOnce.Do(func() {
		c.quitCancel()
		started := true
		c.startOnce.Do(func() { started = false })
		if started {
			<-c.done
		}
		c.cl.Close()
	})
}

// Stats returns the counters so far.
func (c *Consumer) Stats() Stats {
	c.mismatchMu.Lock()
	mismatched := maps.Clone(c.mismatched)
	c.mismatchMu.Unlock()
	return Stats{
		Mismatched:     mismatched,
		Batches:        c.batches.Load(),
		Applied:        c.applied.Load(),
		AlreadyApplied: c.alreadyApplied.Load(),
		Rejected:       c.rejected.Load(),
		Undecodable:    c.undecodable.Load(),
		Failures:       c.failures.Load(),
	}
}

func (c *Consumer) run(ctx context.Context) {
	backoff := c.cfg.RetryBackoff
	for c.quit.Err() == nil {
		res, err := c.runOnce(ctx)
		if err == nil {
			backoff = c.cfg.RetryBackoff
			continue
		}
		if c.quit.Err() != nil {
			return // stopping: an unfinished batch is replayed by the next owner
		}
		c.cfg.Logger.Warn("kafkalog: batch failed; retrying it", "topic", c.cfg.Topic,
			"group", c.cfg.Group, "records", res.Polled, "backoff", backoff, "err", err)
		select {
		case <-c.quit.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.cfg.MaxRetryBackoff)
	}
}

// deadLetter is a record headed for the dead-letter topic and why.
type deadLetter struct {
	rec    *kgo.Record
	reason string
}

// runOnce polls one batch (waiting until records arrive, ctx ends or Stop
// is called), applies it, dead-letters what cannot be applied, and commits.
// On any failure it rewinds the batch's partitions so that the next poll
// returns the same records, and returns the error without committing.
func (c *Consumer) runOnce(ctx context.Context) (batchResult, error) {
	var res batchResult
	pollCtx, cancelPoll := context.WithCancel(ctx)
	stopPoll := context.AfterFunc(c.quit, cancelPoll)
	fetches := c.cl.PollRecords(pollCtx, c.cfg.BatchSize)
	stopPoll()
	cancelPoll()
	// Revocations wait while a batch is in hand; let them run once it is
	// committed or rewound.
	defer c.cl.AllowRebalance()

	if fetches.IsClientClosed() {
		return res, fmt.Errorf("kafkalog: consumer is closed: %w", context.Canceled)
	}
	var pollErr error
	fetches.EachError(func(topic string, partition int32, err error) {
		if pollErr == nil {
			pollErr = fmt.Errorf("kafkalog: fetch %s/%d: %w", topic, partition, err)
		}
	})
	records := fetches.Records()
	res.Polled = len(records)
	if len(records) == 0 {
		// The client retries fetch errors by itself; returning the error
		// makes the loop back off instead of spinning on it.
		return res, pollErr
	}
	if pollErr != nil {
		c.cfg.Logger.Warn("kafkalog: fetch error beside a batch", "topic", c.cfg.Topic, "err", pollErr)
	}

	ctx, cancel := context.WithTimeout(ctx, c.cfg.BatchTimeout)
	defer cancel()
	if err := c.apply(ctx, records, &res); err != nil {
		c.failures.Add(1)
		c.rewind(records)
		return res, err
	}
	res.Committed = true
	c.batches.Add(1)
	c.applied.Add(asCount(res.Applied))
	c.alreadyApplied.Add(asCount(res.AlreadyApplied))
	c.rejected.Add(asCount(res.Rejected))
	c.undecodable.Add(asCount(res.Undecodable))
	if len(res.Mismatched) > 0 {
		c.mismatchMu.Lock()
		for reason, n := range res.Mismatched {
			c.mismatched[reason] += asCount(n)
		}
		c.mismatchMu.Unlock()
	}
	return res, nil
}

// asCount is n, a number of records of one batch, for the running totals of
// Stats; such a number is never negative.
func asCount(n int) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// apply decodes, applies, dead-letters and commits records, in that order.
func (c *Consumer) apply(ctx context.Context, records []*kgo.Record, res *batchResult) error {
	events := make([]voucher.ReservedEvent, 0, len(records))
	eventRecs := make([]*kgo.Record, 0, len(records))
	var dead []deadLetter
	for _, r := range records {
		if len(c.cfg.SigningKey) > 0 {
			if reason, ok := signed(c.cfg.SigningKey, r); !ok {
				dead = append(dead, deadLetter{rec: r, reason: reason})
				if res.Mismatched == nil {
					res.Mismatched = map[string]int{}
				}
				res.Mismatched[MismatchSignature]++
				c.cfg.Logger.Warn("kafkalog: record without a valid signature; dead-lettered", "topic", c.cfg.Topic,
					"partition", r.Partition, "offset", r.Offset, "reason", reason)
				continue
			}
		}
		e, err := decodeEvent(r.Value)
		if err != nil {
			dead = append(dead, deadLetter{rec: r, reason: err.Error()})
			res.Undecodable++
			continue
		}
		events = append(events, e)
		eventRecs = append(eventRecs, r)
	}
	events, eventRecs, dead, err := c.check(ctx, events, eventRecs, dead, res)
	if err != nil {
		return err
	}

	if len(events) > 0 {
		results, err := c.applyReserved(ctx, events, eventRecs)
		if err != nil {
			return fmt.Errorf("kafkalog: apply %d events: %w", len(events), err)
		}
		if len(results) != len(events) {
			return fmt.Errorf("kafkalog: the store returned %d results for %d events", len(results), len(events))
		}
		for i, r := range results {
			switch r.Outcome {
			case voucher.Applied:
				res.Applied++
			case voucher.AlreadyApplied:
				res.AlreadyApplied++
			case voucher.Rejected:
				reason := r.Reason
				if reason == "" {
					reason = "rejected by the store"
				}
				dead = append(dead, deadLetter{rec: eventRecs[i], reason: reason})
				res.Rejected++
				// Named in the log: its reservation may have been answered
				// 201, and now has no row.
				c.cfg.Logger.Warn("kafkalog: event refused by the store; dead-lettered", "topic", c.cfg.Topic,
					"partition", eventRecs[i].Partition, "offset", eventRecs[i].Offset, "code", events[i].Code,
					"campaignCode", events[i].CampaignCode, "orderId", events[i].OrderID, "replaces", events[i].ReplacesOrderID,
					"reason", reason)
			default:
				return fmt.Errorf("kafkalog: the store returned unknown outcome %d for order %s", r.Outcome, events[i].OrderID)
			}
		}
	}

	if len(dead) > 0 {
		if err := c.produceDeadLetters(ctx, dead); err != nil {
			return err
		}
	}
	// The store has committed; a crash from here on replays the batch, which
	// the store applies idempotently. ctx ending here is such a crash.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafkalog: stopped before committing offsets: %w", err)
	}
	if err := c.cl.CommitRecords(ctx, records...); err != nil {
		return fmt.Errorf("kafkalog: commit offsets: %w", err)
	}
	return nil
}

// check asks Config.Check about events (decoded from recs) and returns the
// events to apply with their records, and dead with the refused ones added.
func (c *Consumer) check(ctx context.Context, events []voucher.ReservedEvent, recs []*kgo.Record,
	dead []deadLetter, res *batchResult) ([]voucher.ReservedEvent, []*kgo.Record, []deadLetter, error) {
	if c.cfg.Check == nil || len(events) == 0 {
		return events, recs, dead, nil
	}
	verdicts, err := c.cfg.Check.Check(ctx, events)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kafkalog: check %d events: %w", len(events), err)
	}
	if len(verdicts) != len(events) {
		return nil, nil, nil, fmt.Errorf("kafkalog: the check returned %d verdicts for %d events", len(verdicts), len(events))
	}
	keep := 0
	for i, v := range verdicts {
		if v.Reason == "" {
			events[keep], recs[keep] = events[i], recs[i]
			keep++
			continue
		}
		dead = append(dead, deadLetter{rec: recs[i], reason: v.String()})
		if res.Mismatched == nil {
			res.Mismatched = map[string]int{}
		}
		res.Mismatched[v.Reason]++
		// Named in the log: the event says a reservation was answered 201,
		// and nothing is written for it.
		c.cfg.Logger.Warn("kafkalog: event disagrees with its voucher; dead-lettered", "topic", c.cfg.Topic,
			"partition", recs[i].Partition, "offset", recs[i].Offset, "code", events[i].Code,
			"orderId", events[i].OrderID, "reason", v.String())
	}
	return events[:keep], recs[:keep], dead, nil
}

// applyReserved writes events with the store, in the context that
// Config.ApplyContext makes from the records' contexts, when set.
func (c *Consumer) applyReserved(ctx context.Context, events []voucher.ReservedEvent, recs []*kgo.Record) ([]voucher.ApplyResult, error) {
	if c.cfg.ApplyContext == nil {
		return c.applier.ApplyReserved(ctx, events)
	}
	ctxs := make([]context.Context, len(recs))
	for i, r := range recs {
		ctxs[i] = r.Context
		if ctxs[i] == nil {
			ctxs[i] = context.Background()
		}
	}
	ctx, done := c.cfg.ApplyContext(ctx, ctxs)
	defer done()
	return c.applier.ApplyReserved(ctx, events)
}

func (c *Consumer) produceDeadLetters(ctx context.Context, dead []deadLetter) error {
	recs := make([]*kgo.Record, len(dead))
	for i, d := range dead {
		headers := make([]kgo.RecordHeader, 0, len(d.rec.Headers)+4)
		headers = append(headers, d.rec.Headers...)
		headers = append(headers,
			kgo.RecordHeader{Key: HeaderDeadLetterReason, Value: []byte(d.reason)},
			kgo.RecordHeader{Key: HeaderDeadLetterTopic, Value: []byte(d.rec.Topic)},
			kgo.RecordHeader{Key: HeaderDeadLetterPartition, Value: offsetString(d.rec.Partition)},
			kgo.RecordHeader{Key: HeaderDeadLetterOffset, Value: offsetString(d.rec.Offset)},
		)
		recs[i] = &kgo.Record{Topic: c.cfg.DeadLetterTopic, Key: d.rec.Key, Value: d.rec.Value, Headers: headers}
	}
	timeout := c.cfg.ProduceTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(deadline), 0)
	}
	if err := produceWait(ctx, c.cl, timeout, recs...); err != nil {
		return fmt.Errorf("kafkalog: write %d dead letters to %s: %w", len(recs), c.cfg.DeadLetterTopic, err)
	}
	return nil
}

// rewind moves each partition of records back to its first record in the
// batch, so that the next poll returns the batch again. It runs before
// AllowRebalance, while the partitions are still ours; a partition lost
// since is skipped by the client, and its next owner starts from the last
// commit anyway.
func (c *Consumer) rewind(records []*kgo.Record) {
	to := make(map[string]map[int32]kgo.EpochOffset)
	for _, r := range records {
		ps := to[r.Topic]
		if ps == nil {
			ps = make(map[int32]kgo.EpochOffset)
			to[r.Topic] = ps
		}
		if o, ok := ps[r.Partition]; !ok || r.Offset < o.Offset {
			ps[r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset}
		}
	}
	c.cl.SetOffsets(to)
}
