package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/batch"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/telemetry"
)

// ErrStopped answers a webhook offered after the committer was stopped,
// or still queued when it stopped: nothing was committed, the PSP retries.
var ErrStopped = errors.New("ingest committer stopped")

// ErrOverloaded answers a webhook that arrived while the line of webhooks
// waiting for a commit was full: nothing was committed, and the caller is
// answered at once (503 with Retry-After) instead of waiting behind more
// work than the committers can do in QueueBudget; the PSP retries.
var ErrOverloaded = errors.New("too many webhooks waiting to be committed")

// QueueBudget is how long a webhook may wait for its commit (in line and
// in its group's transaction) when the committers are saturated. Admission
// is bounded by time: a webhook is refused when the expected wait — the
// groups ahead of it at the measured time per commit, then its own —
// exceeds it (the first group in line is always taken, so a slow spell
// cannot shut the door for good), or when every committer has been stuck
// in one commit for stallFactor budgets (a stall, not a slow commit). The
// line's count bound (what they commit in that time at their measured
// rate, never less than one full group per committer; minLineGroups of
// them until a full group was measured) stays as a cap.
// So the wait of an accepted webhook stays near QueueBudget however much
// more is offered, also when Postgres slows down, and what is beyond it is
// refused in microseconds rather than left to time out.
const QueueBudget = 250 * time.Millisecond

// stallFactor is how many budgets every committer must have spent in its
// current commit before the committers count as stalled and nothing more
// is admitted. One budget is too few: a commit that waited for a core on
// a busy host, or a GC pause, would shed webhooks from a few clients that
// are no overload at all; four budgets (a second) is the answer time a
// caller is promised under overload, already lost for whoever waits.
const stallFactor = 4

// minLineGroups is the line's bound, in full groups per committer, until
// the committers have been measured at full groups: a burst on a quiet
// service is committed, not shed.
const minLineGroups = 4

// maxLineGroups bounds the line, in full groups per committer, whatever
// the measured rate says (and sizes the queue, so that enqueueing an
// admitted webhook never blocks).
const maxLineGroups = 64

// Committer commits webhooks in groups (group commit): concurrent requests
// share one transaction and one WAL flush instead of paying for one each.
// Nothing waits to fill a group: a committer takes whatever is queued when it
// is free, so an idle service commits every webhook alone, at once, and a
// busy one commits them together. Each caller is still answered only after
// the transaction holding its webhook committed.
//
// It is a lifecycle.Component: Stop commits what is queued (soft stop) and,
// when Stop's context runs out, cancels the commits in flight (hard stop),
// so an unreachable Postgres cannot hold the shutdown.
type Committer struct {
	lifecycle.Base
	panics   *panics.Counter
	logger   *slog.Logger
	clock    func() time.Time
	store    *Store
	queue    chan *request
	workers  int
	maxGroup int

	// inLine counts the webhooks admitted and not yet taken into a group;
	// lineLimit is its bound (admission control), from rate, between
	// minLine and cap(queue).
	inLine    atomic.Int64
	lineLimit atomic.Int64
	minLine   int64
	mu        sync.Mutex
	// rate is the committers' measured capacity per committer, in webhooks
	// per second: a moving average over the full groups only (a group that
	// took everything queued says how much came, not how much could go).
	rate float64
	// budget is QueueBudget unless a test set another.
	budget time.Duration
	// commitNanos is a moving average of a group's commit time, every
	// group counted (a commit takes about as long whatever its size).
	commitNanos atomic.Int64
	// busySince holds, per committer, when its current commit started
	// (unix nanoseconds), 0 while it waits for work.
	busySince []atomic.Int64
}

type request struct {
	p    Pending
	done chan Saved
}

// CommitterConfig sizes a Committer: Workers concurrent transactions of at
// most MaxGroup webhooks each (INGEST_COMMIT_WORKERS, INGEST_COMMIT_GROUP).
type CommitterConfig struct {
	Workers  int
	MaxGroup int
	// MinLine is the least bound of the line of webhooks waiting for a
	// commit; 0 is one full group per committer. Tests that must never
	// shed, whatever the machine's speed, set it high (and Budget long).
	MinLine int
	// Budget is how long a webhook may expect to wait for its commit
	// before it is refused; 0 is QueueBudget (production has no other).
	Budget time.Duration
}

// NewCommitter returns a committer saving to store. deps.Panics counts the
// panics it recovers: a panic while committing a group answers every webhook
// of that group with the error (a 5xx: nothing was committed, the PSP
// retries) and the committer goes on with the next group; without this
// recovery the goroutine's panic would kill the process with every queued
// webhook.
func NewCommitter(store *Store, cfg CommitterConfig, deps lifecycle.Deps) (*Committer, error) {
	if cfg.Workers < 1 || cfg.MaxGroup < 1 {
		return nil, fmt.Errorf("committer needs at least one worker and a group size of at least 1")
	}
	deps = deps.WithDefaults()
	least := cfg.MinLine
	if least < 1 {
		least = cfg.Workers * cfg.MaxGroup
	}
	size := max(maxLineGroups*cfg.Workers*cfg.MaxGroup, least)
	c := &Committer{store: store, queue: make(chan *request, size), workers: cfg.Workers,
		maxGroup: cfg.MaxGroup, logger: deps.Logger, clock: deps.Clock, panics: deps.Panics, minLine: int64(least),
		budget: cfg.Budget, busySince: make([]atomic.Int64, cfg.Workers)}
	if c.budget <= 0 {
		c.budget = QueueBudget
	}
	c.lineLimit.Store(int64(max(least, minLineGroups*cfg.Workers*cfg.MaxGroup)))
	for _, m := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "aegis_ingest_line",
			Help: "Webhooks verified and waiting for their group commit."},
			func() float64 { return float64(c.inLine.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "aegis_ingest_line_limit",
			Help: "The bound on aegis_ingest_line: what the committers commit in QueueBudget (250ms) at their measured rate; beyond it webhooks are answered 503 with Retry-After."},
			func() float64 { return float64(c.lineLimit.Load()) }),
	} {
		if err := deps.Registerer.Register(m); err != nil {
			return nil, fmt.Errorf("register ingest metrics: %w", err)
		}
	}
	return c, nil
}

// Full reports whether a webhook offered now would be refused with
// ErrOverloaded: a caller checks it before reading and verifying a body it
// would then have to refuse anyway.
func (c *Committer) Full() bool {
	n := c.inLine.Load() + 1
	return n > c.lineLimit.Load() || c.tooLate(n)
}

// admit takes a place in line, or reports that the line is full or that
// the wait for a commit would exceed the budget.
func (c *Committer) admit() bool {
	n := c.inLine.Add(1)
	if n > c.lineLimit.Load() || c.tooLate(n) {
		c.inLine.Add(-1)
		return false
	}
	return true
}

// tooLate reports whether the n-th webhook in line would wait longer than
// the budget for its commit: the commits ahead of it, by the committers in
// turn at the measured time per commit, and its own; or every committer
// has been in its current commit for stallFactor budgets already
// (Postgres stalled: nothing measured says when it will be free). A
// webhook of the first round is never too late by the average alone: with
// the line empty nothing else would ever be committed and measured again.
func (c *Committer) tooLate(n int64) bool {
	groups := (n + int64(c.maxGroup) - 1) / int64(c.maxGroup)
	rounds := (groups + int64(c.workers) - 1) / int64(c.workers)
	if rounds > 1 && time.Duration(rounds*c.commitNanos.Load()) > c.budget {
		return true
	}
	now := c.clock().UnixNano()
	for i := range c.busySince {
		since := c.busySince[i].Load()
		if since == 0 || time.Duration(now-since) <= stallFactor*c.budget {
			return false
		}
	}
	return true
}

// committed folds one group's commit time into the moving average.
func (c *Committer) committed(took time.Duration) {
	for {
		old := c.commitNanos.Load()
		next := int64(took)
		if old != 0 {
			next = old + (int64(took)-old)/8
		}
		if c.commitNanos.CompareAndSwap(old, next) {
			return
		}
	}
}

// measured folds a full group's commit into the rate and resizes the line.
func (c *Committer) measured(n int, took time.Duration) {
	if n < c.maxGroup || took <= 0 {
		return
	}
	sample := float64(n) / took.Seconds()
	c.mu.Lock()
	if c.rate == 0 {
		c.rate = sample
	} else {
		c.rate += (sample - c.rate) / 8
	}
	rate := c.rate
	c.mu.Unlock()
	limit := int64(rate * float64(c.workers) * QueueBudget.Seconds())
	c.lineLimit.Store(min(max(limit, c.minLine), int64(cap(c.queue))))
}

// Start runs the committers until Stop. Stop it after the HTTP server has
// shut down, so that no request is still enqueueing.
func (c *Committer) Start(ctx context.Context) error {
	routines := make([]lifecycle.Routine, c.workers)
	for i := range routines {
		busy := &c.busySince[i]
		routines[i] = func(soft, hard context.Context) error { return c.work(soft, hard, busy) }
	}
	return c.Base.Start(ctx, routines...)
}

// Save queues p and waits for its commit.
func (c *Committer) Save(ctx context.Context, p Pending) (Saved, error) {
	// The group commits on its own context: the request's trace context
	// travels with the webhook into its outbox row's headers.
	if !c.admit() {
		return Saved{}, ErrOverloaded
	}
	p.TraceHeaders = telemetry.Inject(ctx, p.TraceHeaders)
	r := &request{p: p, done: make(chan Saved, 1)}
	// The queue holds cap(queue) >= lineLimit >= inLine requests: an
	// admitted request never waits here.
	select {
	case c.queue <- r:
	case <-c.Stopping():
		c.inLine.Add(-1)
		return Saved{}, ErrStopped
	case <-ctx.Done():
		c.inLine.Add(-1)
		return Saved{}, ctx.Err()
	}
	// Once queued the webhook is committed or refused whether or not the
	// caller is still waiting; a PSP that gave up retries and is told
	// "duplicate".
	select {
	case s := <-r.done:
		return s, s.Err
	case <-c.Done():
		// Every committer returned: r was answered just now, or it was
		// queued after they drained the queue and will never be committed.
		select {
		case s := <-r.done:
			return s, s.Err
		default:
			return Saved{}, ErrStopped
		}
	case <-ctx.Done():
		return Saved{}, ctx.Err()
	}
}

// work commits groups until the soft stop, then commits what is still
// queued; commits run on hard, cancelled when Stop's context runs out.
func (c *Committer) work(soft, hard context.Context, busy *atomic.Int64) error {
	for {
		select {
		case first := <-c.queue:
			c.commit(hard, c.fill(first), busy)
		case <-soft.Done():
			for {
				select {
				case first := <-c.queue:
					c.commit(hard, c.fill(first), busy)
				default:
					return nil
				}
			}
		}
	}
}

// fill adds to first whatever else is queued, up to maxGroup, and takes
// them out of the line.
func (c *Committer) fill(first *request) []*request {
	group := batch.Gather(first, c.queue, c.maxGroup)
	c.inLine.Add(-int64(len(group)))
	return group
}

func (c *Committer) commit(ctx context.Context, group []*request, busy *atomic.Int64) {
	// Requests outlive their HTTP contexts here on purpose (ctx is the
	// committer's): a half-committed group must not be cancelled by one
	// client hanging up.
	ctx, span := commitSpan(ctx, group)
	pending := make([]Pending, len(group))
	for i, r := range group {
		pending[i] = r.p
	}
	start := c.clock()
	busy.Store(start.UnixNano())
	results, perr := c.save(ctx, pending)
	took := c.clock().Sub(start)
	c.committed(took) // a failed commit's time counts too: it is what the line waits
	if perr == nil && results[0].Err == nil {
		c.measured(len(group), took)
	}
	if len(group) > 1 && (perr != nil || results[0].Err != nil) {
		// One bad webhook must not fail its neighbours: try each alone.
		results = make([]Saved, len(group))
		for i, r := range group {
			one, err := c.save(ctx, []Pending{r.p})
			if err != nil {
				results[i] = Saved{Err: err}
				continue
			}
			results[i] = one[0]
		}
		perr = nil
	}
	// The committer is free before anyone is answered: an answered caller
	// that offers its next webhook at once must not find it stuck.
	busy.Store(0)
	// The span ends before anyone is answered: a request's trace is whole
	// when its response is written.
	span.End()
	for i, r := range group {
		if perr != nil {
			r.done <- Saved{Err: perr}
			continue
		}
		r.done <- results[i]
	}
}

// commitSpan starts the span of a group's commit, on a context of its own
// (requests outlive their HTTP contexts here on purpose: a half-committed
// group must not be cancelled by one client hanging up). A group of one (a
// quiet moment) is committed inside its request's trace; a larger group
// belongs to no one request: its span starts a trace linked to each of
// theirs.
func commitSpan(ctx context.Context, group []*request) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithAttributes(attribute.Int("aegis.group_size", len(group)))}
	if len(group) == 1 {
		ctx = telemetry.Extract(ctx, group[0].p.TraceHeaders)
	} else {
		for _, r := range group {
			if sc := trace.SpanContextFromContext(telemetry.Extract(ctx, r.p.TraceHeaders)); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
			}
		}
	}
	return otel.Tracer("github.com/aegis-payments/aegis/services/webhook-api/internal/ingest").Start(ctx, "webhook commit", opts...)
}

// save is SaveGroup with a panic turned into an error (the transaction was
// rolled back by database.InTx on the way up).
func (c *Committer) save(ctx context.Context, pending []Pending) ([]Saved, error) {
	var results []Saved
	err := c.panics.Call(ctx, c.logger, "webhook-api/committer", func() error {
		results = c.store.SaveGroup(ctx, pending)
		return nil
	})
	return results, err
}
