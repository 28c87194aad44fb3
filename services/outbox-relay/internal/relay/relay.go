package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/telemetry"
)

// Config tunes a relay.
type Config struct {
	// Owner identifies this relay in leases (locked_by).
	Owner        string
	BatchSize    int
	PollInterval time.Duration
	// Lease is how long a claimed row stays this relay's before another may
	// take it over. It must exceed PublishTimeout comfortably.
	Lease          time.Duration
	PublishTimeout time.Duration
	Backoff        backoff.Policy
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Owner == "" {
		errs = append(errs, config.Invalid("Owner", "must be set"))
	}
	if c.BatchSize < 1 {
		errs = append(errs, config.Invalid("BatchSize", "must be at least 1"))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, config.Invalid("PollInterval", "must be positive"))
	}
	if c.PublishTimeout <= 0 {
		errs = append(errs, config.Invalid("PublishTimeout", "must be positive"))
	}
	if c.Lease < 2*c.PublishTimeout {
		errs = append(errs, config.Invalid("Lease", "(%s) must be at least twice %s (%s)", c.Lease, config.Ref("PublishTimeout"), c.PublishTimeout))
	}
	if err := c.Backoff.Validate(); err != nil {
		errs = append(errs, config.Within("Backoff", err))
	}
	return errors.Join(errs...)
}

// Producer is the part of *kgo.Client the relay uses. The client must be
// created with ClientOpts.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	Flush(ctx context.Context) error
}

// ClientOpts are the franz-go options the relay relies on.
//
// ManualFlushing keeps per-key order when a produce request fails mid-run.
// franz-go fails every record buffered for a partition behind a failed
// batch and bumps its producer epoch, and the broker refuses the requests
// already in flight behind it (their sequence no longer follows); but with
// automatic flushing a record the relay hands over after that moment starts
// the new epoch and lands, ahead of the failed record's retry — a key's
// later row overtaking its earlier one. With manual flushing the relay hands
// over its whole batch first and only then lets it be sent (publish), so
// every row behind a failed one fails with it and waits for its retry. A
// flush sends everything buffered on the client, so the loops sharing it
// take turns (Relay.producing): no batch is handed over while another is
// being flushed.
func ClientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.ManualFlushing()}
}

// Relay moves outbox rows to Kafka.
type Relay struct {
	cfg     Config
	store   *outbox.Store
	kafka   Producer
	breaker *breaker.Breaker[struct{}]
	logger  *slog.Logger
	metrics *Metrics
	letters *dlq.Writer
	now     func() time.Time
	wake    chan struct{}
	panics  *panics.Counter
	// claims counts the claims this process's loops have started: a settle
	// that sees it move claimed rows may have been skipped behind its batch.
	claims atomic.Uint64
	// producing is held by whoever hands records to the client and flushes
	// them: the loops share one client, whose flush sends everything
	// buffered, so a batch handed over during another's flush would be sent
	// record by record instead of buffered whole (ClientOpts).
	producing sync.Mutex
}

// Deps is what a relay works with, next to the logger, clock, registry
// (its metrics are registered there) and panic counter every component
// gets. Without Panics, panics are recovered and logged all the same.
type Deps struct {
	lifecycle.Deps
	Store   *outbox.Store
	Kafka   Producer
	Breaker *breaker.Breaker[struct{}]
}

// New returns a relay. Call Run to start it.
func New(cfg Config, deps Deps) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil || deps.Kafka == nil || deps.Breaker == nil {
		return nil, errors.New("relay needs a store, a Kafka producer and a breaker")
	}
	common := deps.WithDefaults()
	letters, err := dlq.NewWriter("outbox-relay", common)
	if err != nil {
		return nil, err
	}
	return &Relay{cfg: cfg, store: deps.Store, kafka: deps.Kafka, breaker: deps.Breaker, logger: common.Logger,
		metrics: NewMetrics(common.Registerer), letters: letters, now: common.Clock, panics: common.Panics,
		wake: make(chan struct{}, 1)}, nil
}

// Wake makes an idle relay look for work now (a NOTIFY arrived).
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run relays until ctx is done. The batch in flight when ctx ends is
// finished and settled first.
//
// A batch that was not full (the relay keeps up: the latency path) is
// settled in the background while the loop goes on to claim and publish the
// next, so a row committed during a settle does not wait for that settle's
// round trip and commit before it is claimed. Per-key order holds: until
// the settle commits, the batch's rows are processing under this relay's
// lease, and Claim takes no row of a key whose first unfinished row is
// leased (see pkg/outbox), whoever claims. A claim that ran beside a settle
// may have skipped rows that settle was blocking, so the loop claims again
// as soon as the settle is done. At most one settle per loop is in flight:
// the loop waits for it before handing over the next batch, and before it
// returns. A full batch (a backlog) is settled before the next claim, as
// before: its keys' next rows are due at once, and a claim running beside
// the settle would find them blocked and walk a hot key's backlog for
// nothing.
func (r *Relay) Run(ctx context.Context) error {
	idle := time.NewTimer(0)
	defer idle.Stop()
	var settling chan error  // the background settle's outcome; nil when none is in flight
	var cursor outbox.Cursor // this loop's place in the backlog (outbox.Cursor)
	claimedBeside := false   // a claim ran while the settle in flight was running
	failures := 0
	for {
		again := false // a settle that may have blocked rows just ended
		var settleErr error
		select {
		case <-ctx.Done():
			if settling != nil {
				if err := <-settling; err != nil {
					r.logger.Error("relay settle failed", "error", err.Error())
				}
			}
			return nil
		case <-idle.C:
		case <-r.wake:
		case settleErr = <-settling:
			settling = nil
			again, claimedBeside = claimedBeside, false
			if !again && settleErr == nil {
				continue // no claim ran beside it, so it blocked nothing
			}
		}
		// A panic in a cycle restarts the loop (after the failure pause),
		// never the process; rows it had claimed come back after the lease.
		claimedBeside = claimedBeside || settling != nil
		var b *batch
		err := r.panics.Call(ctx, r.logger, "outbox-relay/loop", func() error {
			var err error
			b, err = r.claimAndPublish(ctx, &cursor)
			return err
		})
		n := b.size()
		if b != nil {
			if settling != nil {
				// One settle in flight per loop: the previous one ends first.
				err = errors.Join(err, <-settling)
				settling = nil
			}
			again, claimedBeside = again || claimedBeside, false
			if n == r.cfg.BatchSize {
				err = errors.Join(err, r.safeSettle(ctx, b))
			} else {
				done := make(chan error, 1)
				settling = done
				go func() { done <- r.safeSettle(ctx, b) }()
			}
		}
		err = errors.Join(err, settleErr)
		wait := r.cfg.PollInterval
		switch {
		case err != nil && errclass.Of(err) == errclass.BreakerOpen:
			// Nothing was claimed; look again when a probe may pass.
		case err != nil:
			failures++
			wait = min(time.Duration(failures)*200*time.Millisecond, 5*time.Second)
			r.logger.Error("relay cycle failed", "error", err.Error(), "consecutive_failures", failures)
		case n == r.cfg.BatchSize || again:
			// A full batch: there is more waiting. Or a settle that ran
			// beside a claim has ended: rows it blocked are due now.
			failures = 0
			wait = 0
			r.metrics.lastSuccess.SetToCurrentTime()
		default:
			failures = 0
			r.metrics.lastSuccess.SetToCurrentTime()
		}
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(wait)
	}
}

// batch is a claimed and published batch waiting to be settled.
type batch struct {
	rows    []outbox.Row
	results []error
	// work outlives the caller's ctx: rows already sent to Kafka must be
	// settled, or they would be published twice after the lease.
	work               context.Context
	cancel             context.CancelFunc
	t0                 time.Time
	claimed, published time.Duration
	claimSeq           uint64 // Relay.claims after this batch's claim began
}

func (b *batch) size() int {
	if b == nil {
		return 0
	}
	return len(b.rows)
}

// Cycle claims, publishes and settles one batch and reports its size. It is
// exported for tests and benchmarks that drive the relay step by step.
func (r *Relay) Cycle(ctx context.Context) (int, error) {
	var cursor outbox.Cursor
	b, err := r.claimAndPublish(ctx, &cursor)
	if b == nil {
		return 0, err
	}
	return len(b.rows), r.settleBatch(b)
}

// claimAndPublish claims a batch from cursor's place and publishes it. It
// returns nil when nothing was claimed or the rows were handed back;
// otherwise the caller must settle the batch.
func (r *Relay) claimAndPublish(ctx context.Context, cursor *outbox.Cursor) (*batch, error) {
	if r.breaker.State() == breaker.Open {
		return nil, errclass.New(errclass.BreakerOpen, errors.New("kafka breaker open"))
	}
	t0 := time.Now()
	seq := r.claims.Add(1)
	rows, err := r.store.ClaimFrom(ctx, cursor, r.now(), r.cfg.BatchSize, r.cfg.Lease, r.cfg.Owner)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, nil
	}
	claimed := time.Since(t0)
	r.metrics.batchSize.Observe(float64(len(rows)))
	// From here the batch is finished even if ctx ends: rows already sent to
	// Kafka must be settled, or they would be published twice after the lease.
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout+10*time.Second)

	var results []error
	_, err = r.breaker.Execute(func() (struct{}, error) {
		results = r.safePublish(work, rows)
		// Kafka is down only if nothing got through: one record failing for
		// its own reasons must not stop every other key.
		var transient error
		for _, e := range results {
			if e == nil {
				return struct{}{}, nil
			}
			if errclass.Of(e) == errclass.Transient {
				transient = e
			}
		}
		return struct{}{}, transient
	})
	if results == nil {
		// The breaker refused the call (a probe is already in flight): hand
		// the rows back without spending an attempt.
		defer cancel()
		return nil, errors.Join(err, r.store.Release(work, ids(rows), r.cfg.Owner, r.now()))
	}
	return &batch{rows: rows, results: results, work: work, cancel: cancel, t0: t0, claimed: claimed,
		published: time.Since(t0) - claimed, claimSeq: seq}, nil
}

// settleBatch settles a published batch (see settle) and logs the cycle.
func (r *Relay) settleBatch(b *batch) error {
	defer b.cancel()
	start := time.Now()
	err := r.settle(b.work, b.rows, b.results)
	if r.claims.Load() != b.claimSeq {
		// Another claim of this process ran while the batch was unsettled
		// and skipped the rows queued behind it; they are due now, and
		// that claim's loop may be asleep.
		r.Wake()
	}
	r.logger.Debug("relay cycle", "rows", len(b.rows), "claim_ms", ms(b.claimed), "publish_ms", ms(b.published),
		"settle_ms", ms(time.Since(start)), "cycle_ms", ms(time.Since(b.t0)))
	return err
}

// safeSettle is settleBatch with a panic turned into an error: the rows it
// did not settle stay processing and come back after the lease.
func (r *Relay) safeSettle(ctx context.Context, b *batch) error {
	return r.panics.Call(ctx, r.logger, "outbox-relay/settle", func() error { return r.settleBatch(b) })
}

// errNoAck marks a row whose ack did not come within the publish timeout.
var errNoAck = errors.New("no ack from Kafka within the publish timeout")

// publish produces rows and waits for their acks, but never longer than
// PublishTimeout: franz-go cannot fail records already inside an in-flight
// produce request, and a broker that vanished mid-request would otherwise
// hold the batch (and a shutdown) for the request's own, longer timeout. A
// row without an ack is treated as failed and retried; if the record did land
// after all, the retry is an at-least-once duplicate, which consumers absorb,
// and the key's next row still waits for this one, so order holds.
func (r *Relay) publish(ctx context.Context, rows []outbox.Row) []error {
	r.producing.Lock()
	defer r.producing.Unlock() // last: after the flush below has ended
	ctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	type ack struct {
		i   int
		err error
	}
	// Buffered for every row: a late callback never blocks or races.
	acks := make(chan ack, len(rows))
	for i, row := range rows {
		rec := &kgo.Record{Topic: row.Topic, Key: []byte(row.PartitionKey), Value: row.Payload}
		for k, v := range row.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		if row.CorrelationID != "" && kafkax.Header(rec, kafkax.HeaderCorrelationID) == "" {
			kafkax.SetHeader(rec, kafkax.HeaderCorrelationID, row.CorrelationID)
		}
		// The record's publish span (kotel) continues the trace that wrote
		// the row, and its traceparent replaces the row's in the headers.
		r.kafka.Produce(telemetry.Extract(ctx, row.Headers), rec, func(_ *kgo.Record, err error) { acks <- ack{i, err} })
	}
	// The batch is buffered whole; now it may go (ClientOpts). Flushing
	// lasts until publish returns, so that franz-go's own retries of a
	// batch are sent too.
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		_ = r.kafka.Flush(ctx) // ends with ctx at the latest; the acks say what landed
	}()
	defer func() { cancel(); <-flushed }()
	results := make([]error, len(rows))
	got := make([]bool, len(rows))
	for n := 0; n < len(rows); n++ {
		select {
		case a := <-acks:
			results[a.i], got[a.i] = classifyProduce(a.err), true
		case <-ctx.Done():
			for i := range rows {
				if !got[i] {
					results[i] = errclass.AsTransient(errNoAck)
				}
			}
			return results
		}
	}
	return results
}

// safePublish is publish with a panic turned into a transient failure of
// every row of the batch: each is retried with backoff and dead-lettered
// when its attempts run out, so a row that makes the publish panic every
// time ends in the dead-letter store instead of being reclaimed for ever.
func (r *Relay) safePublish(ctx context.Context, rows []outbox.Row) []error {
	var results []error
	err := r.panics.Call(ctx, r.logger, "outbox-relay/publish", func() error {
		results = r.publish(ctx, rows)
		return nil
	})
	if err != nil {
		results = make([]error, len(rows))
		for i := range results {
			results[i] = errclass.AsTransient(err)
		}
	}
	return results
}

// classifyProduce: a record Kafka will never accept is permanent; everything
// else (timeouts, leader changes, an unreachable broker) is transient.
func classifyProduce(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) ||
		errors.Is(err, kerr.InvalidRecord) {
		return errclass.AsPermanent(err)
	}
	return errclass.AsTransient(err)
}

func (r *Relay) settle(ctx context.Context, rows []outbox.Row, results []error) error {
	now := r.now()
	var done, held []int64
	var errs []error
	var letters []letterRecord
	// blocked holds the keys whose run stopped at a row that will be retried:
	// the rows behind it in this batch go back without spending an attempt
	// and wait for it, whatever their own result, so nothing of the key
	// overtakes the failed row. (franz-go fails every buffered record of a
	// partition behind a failed batch, so they have normally failed too.)
	blocked := map[string]bool{}
	for i, row := range rows {
		if blocked[row.PartitionKey] {
			held = append(held, row.ID)
			continue
		}
		if results[i] == nil {
			done = append(done, row.ID)
			r.metrics.published.WithLabelValues(row.Topic).Inc()
			r.metrics.commitToAck.Observe(now.Sub(row.CreatedAt).Seconds())
			continue
		}
		class := errclass.Of(results[i])
		r.metrics.failures.WithLabelValues(string(class)).Inc()
		attempt := row.RetryCount + 1
		if class == errclass.Permanent || attempt >= row.MaxRetries {
			l, err := r.deadLetter(ctx, row, results[i], class)
			errs = append(errs, err)
			if l.rec != nil {
				letters = append(letters, l)
			}
			continue
		}
		blocked[row.PartitionKey] = true
		next := now.Add(r.cfg.Backoff.Delay(attempt))
		if _, err := r.store.Retry(ctx, row.ID, r.cfg.Owner, results[i], string(class), next); err != nil && !errors.Is(err, outbox.ErrLeaseLost) {
			errs = append(errs, err)
		}
		lctx := logging.WithCorrelationID(telemetry.Extract(ctx, row.Headers), row.CorrelationID)
		r.logger.WarnContext(lctx, "outbox publish failed; retry scheduled", "outbox_id", row.ID, "topic", row.Topic,
			"attempt", attempt, "max_attempts", row.MaxRetries, "next_retry_at", next, "error", results[i].Error())
	}
	if len(done) > 0 {
		if _, err := r.store.DeletePublished(ctx, done, r.cfg.Owner); err != nil {
			errs = append(errs, err)
		}
	}
	if len(held) > 0 {
		// Due at once, but behind their key's failed row: Claim takes them
		// only after it.
		if err := r.store.Release(ctx, held, r.cfg.Owner, now); err != nil {
			errs = append(errs, err)
		}
	}
	r.announce(ctx, letters)
	return errors.Join(errs...)
}

// letterRecord is a stored dead letter's record for aegis.outbox.dlq.
type letterRecord struct {
	rec *kgo.Record
	row outbox.Row // its trace and id
}

// announce publishes the settle's dead letters, best effort, after its
// bookkeeping is committed, with one flush bounded by PublishTimeout: the
// rows in dead_letters are the record of truth, and a Kafka that is down
// (why rows run out of attempts) delays the loop by one timeout, not one
// per letter.
func (r *Relay) announce(ctx context.Context, letters []letterRecord) {
	if len(letters) == 0 {
		return
	}
	r.producing.Lock()
	defer r.producing.Unlock()
	pubCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	defer cancel()
	for _, l := range letters {
		// The publish belongs to the row's trace, as its statements do.
		r.kafka.Produce(telemetry.Extract(pubCtx, l.row.Headers), l.rec, func(_ *kgo.Record, err error) {
			if err != nil {
				r.logger.Warn("dead letter not published to aegis.outbox.dlq; it is stored in dead_letters", "outbox_id", l.row.ID, "error", err.Error())
			}
		})
	}
	_ = r.kafka.Flush(pubCtx) // a record still unsent is failed by its context
}

// deadLetter marks the row dlq and stores its dead letter in one transaction,
// and returns the letter's record for settle to announce on
// aegis.outbox.dlq (none when the row was not this relay's to dead-letter).
func (r *Relay) deadLetter(ctx context.Context, row outbox.Row, cause error, class errclass.Class) (letterRecord, error) {
	// The dead letter's statements belong to the row's trace.
	ctx = telemetry.Extract(ctx, row.Headers)
	var letter dlq.Letter
	var inserted bool
	err := database.InTx(ctx, r.store.Pool(), func(tx pgx.Tx) error {
		d, err := outbox.MarkDeadLetter(ctx, tx, row.ID, r.cfg.Owner, cause, string(class))
		if err != nil {
			return err
		}
		var history []dlq.Attempt
		if err := json.Unmarshal(d.History, &history); err != nil {
			return fmt.Errorf("decode retry history of outbox row %d: %w", row.ID, err)
		}
		id := row.ID
		now := r.now()
		key := kafkax.LetterKey(row.PartitionKey, row.Headers) // dead letters are listed by user
		letter = dlq.Letter{
			Source: dlq.SourceRelay, OriginalTopic: row.Topic, OutboxID: &id, PartitionKey: key,
			EventType: row.EventType, Payload: row.Payload, Headers: row.Headers, Error: cause.Error(),
			ErrorClass: string(class), RetryCount: d.RetryCount, RetryHistory: history,
			FirstFailureAt: firstFailure(history, now), FailedAt: now, CorrelationID: row.CorrelationID,
		}
		_, inserted, err = r.letters.Insert(ctx, tx, letter)
		return err
	})
	if errors.Is(err, outbox.ErrLeaseLost) {
		return letterRecord{}, nil // another relay owns the row now
	}
	if err != nil {
		return letterRecord{}, fmt.Errorf("dead-letter outbox row %d: %w", row.ID, err)
	}
	if inserted {
		r.letters.Written(logging.WithCorrelationID(ctx, row.CorrelationID), letter)
	}
	rec, err := letter.Record()
	if err != nil {
		return letterRecord{}, nil // stored; only its announcement is lost
	}
	return letterRecord{rec: rec, row: row}, nil
}

func firstFailure(h []dlq.Attempt, fallback time.Time) time.Time {
	if len(h) > 0 {
		return h[0].At
	}
	return fallback
}

func ids(rows []outbox.Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// Purge deletes, in chunks until none are left or ctx ends, the rows an
// earlier relay marked processed and kept for its retention (after an
// upgrade, or from an old replica during a rolling deploy): this relay
// deletes its published rows when it settles them.
func (r *Relay) Purge(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := r.store.PurgeProcessed(ctx, 5000)
		total += n
		if err != nil || n < 5000 {
			return total, err
		}
	}
}

// RunPurge purges on every tick of interval until ctx is done.
func (r *Relay) RunPurge(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := r.Purge(ctx)
			if err != nil && ctx.Err() == nil {
				r.logger.Error("outbox purge of processed rows failed", "error", err.Error())
			}
			if n > 0 {
				r.metrics.purged.Add(float64(n))
			}
		}
	}
}

// RunStats refreshes the backlog gauges on every tick of interval.
func (r *Relay) RunStats(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		st, err := r.store.Stats(ctx, r.now())
		if err == nil {
			r.metrics.pending.Set(float64(st.Unfinished))
			r.metrics.oldestAge.Set(st.OldestAge.Seconds())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
