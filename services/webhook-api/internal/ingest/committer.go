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

// QueueBudget is how long a webhook may wait in line for its commit when
// the committers are saturated. The line's bound is what they commit in
// that time at their measured rate (never less than one full group per
// committer; minLineGroups of them until a full group was measured): by
// Little's law the wait of an accepted webhook stays near
// QueueBudget however much more is offered, and what is beyond it is
// refused in microseconds rather than left to time out.
const QueueBudget = 250 * time.Millisecond

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
	// shed, whatever the machine's speed, set it high.
	MinLine int
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
		maxGroup: cfg.MaxGroup, logger: deps.Logger, clock: deps.Clock, panics: deps.Panics, minLine: int64(least)}
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
func (c *Committer) Full() bool { return c.inLine.Load() >= c.lineLimit.Load() }

// admit takes a place in line, or reports that the line is full.
func (c *Committer) admit() bool {
	if c.inLine.Add(1) > c.lineLimit.Load() {
		c.inLine.Add(-1)
		return false
	}
	return true
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
		routines[i] = c.work
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
func (c *Committer) work(soft, hard context.Context) error {
	for {
		select {
		case first := <-c.queue:
			c.commit(hard, c.fill(first))
		case <-soft.Done():
			for {
				select {
				case first := <-c.queue:
					c.commit(hard, c.fill(first))
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
	group := []*request{first}
	defer func() { c.inLine.Add(-int64(len(group))) }()
	for len(group) < c.maxGroup {
		select {
		case r := <-c.queue:
			group = append(group, r)
		default:
			return group
		}
	}
	return group
}

func (c *Committer) commit(ctx context.Context, group []*request) {
	// Requests outlive their HTTP contexts here on purpose (ctx is the
	// committer's): a half-committed group must not be cancelled by one
	// client hanging up.
	ctx, span := commitSpan(ctx, group)
	pending := make([]Pending, len(group))
	for i, r := range group {
		pending[i] = r.p
	}
	start := c.clock()
	results, perr := c.save(ctx, pending)
	if perr == nil && results[0].Err == nil {
		c.measured(len(group), c.clock().Sub(start))
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
