package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/batch"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/panics"
)

// ErrCommitterStopped answers a credit offered after the CreditCommitter
// was stopped, or still queued when it stopped: nothing was committed (the
// consumer retries the record; it is stopped before the committer is).
var ErrCommitterStopped = errors.New("credit committer stopped")

// DefaultCreditGroup is the largest group a CreditCommitter commits in one
// transaction. The consumer has at most WORKER_CONCURRENCY (32) credits in
// flight, so a group rarely reaches it; it bounds a group's transaction
// (its locks, its retry one by one) should that grow.
const DefaultCreditGroup = 64

// rollbackWait bounds the ROLLBACK of a failed group.
const rollbackWait = 5 * time.Second

// CreditCommitter commits credits in groups (group commit, like
// webhook-api's ingest.Committer): the credits waiting when a committer is
// free share one pipelined transaction (BEGIN, each credit's CreditOnce
// statements, COMMIT: one round trip and one WAL flush) instead of paying
// for one commit each. Nothing waits to fill a group: an idle worker commits
// each credit alone at once. Each caller is answered only after the
// transaction holding its credit committed, with its own outcome.
//
// A group that fails (a deadlock or serialization failure, a lost
// connection, or one credit Postgres refuses: a balance overflowing bigint,
// a violated check) is rolled back and its credits are committed again one
// by one (CreditOnce's path), so one bad credit fails only its own caller,
// with its own Postgres error wrapped (%w) for the consumer to classify.
//
// With more than one committer, groups may lock the same wallets
// concurrently: each group locks them in one order (owner, currency, then
// payment reference), so two groups do not deadlock on wallets; whatever
// else deadlocks is the failure above.
//
// It is a lifecycle.Component: Stop commits what is queued (soft stop) and,
// when Stop's context runs out, cancels the commits in flight (hard stop).
// Stop it after the consumer, which is its only caller.
type CreditCommitter struct {
	lifecycle.Base
	ledger   *Ledger
	pool     *pgxpool.Pool
	logger   *slog.Logger
	panics   *panics.Counter
	queue    chan *creditRequest
	workers  int
	maxGroup int
	sizes    prometheus.Histogram
	retried  prometheus.Counter
}

type creditRequest struct {
	cr   *credit
	done chan creditResult
}

type creditResult struct {
	outcome CreditOutcome
	err     error
}

// CreditCommitterConfig sizes a CreditCommitter: Workers concurrent
// transactions of at most MaxGroup credits each (0: DefaultCreditGroup).
type CreditCommitterConfig struct {
	Workers  int
	MaxGroup int
}

// NewCreditCommitter returns a committer of l's credits on pool. A panic
// while committing a group is recovered (counted on deps.Panics): every
// credit of that group is answered with the error, nothing was committed,
// and the committer goes on.
func NewCreditCommitter(l *Ledger, pool *pgxpool.Pool, cfg CreditCommitterConfig, deps lifecycle.Deps) (*CreditCommitter, error) {
	if cfg.MaxGroup == 0 {
		cfg.MaxGroup = DefaultCreditGroup
	}
	if cfg.Workers < 1 || cfg.MaxGroup < 1 {
		return nil, fmt.Errorf("credit committer needs at least one worker and a group size of at least 1")
	}
	deps = deps.WithDefaults()
	c := &CreditCommitter{ledger: l, pool: pool, logger: deps.Logger, panics: deps.Panics,
		queue: make(chan *creditRequest, cfg.Workers*cfg.MaxGroup), workers: cfg.Workers, maxGroup: cfg.MaxGroup,
		sizes: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "aegis_credit_group_size",
			Help:    "Credits per group commit (one transaction).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 7)}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{Name: "aegis_credit_groups_retried_total",
			Help: "Credit groups whose transaction failed (a deadlock, a credit Postgres refused) and whose credits were committed again one by one."}),
	}
	for _, m := range []prometheus.Collector{c.sizes, c.retried} {
		if err := deps.Registerer.Register(m); err != nil {
			return nil, fmt.Errorf("register credit committer metrics: %w", err)
		}
	}
	return c, nil
}

// Start runs the committers until Stop.
func (c *CreditCommitter) Start(ctx context.Context) error {
	routines := make([]lifecycle.Routine, c.workers)
	for i := range routines {
		routines[i] = c.work
	}
	return c.Base.Start(ctx, routines...)
}

// Credit is CreditOnce through a group: it credits the payment, naming the
// consumer message, in the transaction of the group it joins, and returns
// once that committed (or the credit failed alone). The clearing account is
// looked up here, outside any group's transaction. When ctx is done first
// it returns ctx's error at once; the credit may still commit, and its
// redelivery is then a DuplicateMessage. Call it only after Start.
func (c *CreditCommitter) Credit(ctx context.Context, claim Claim, p Receipt) (CreditOutcome, error) {
	cr, err := c.ledger.newCredit(ctx, claim, p)
	if err != nil {
		return "", err
	}
	r := &creditRequest{cr: cr, done: make(chan creditResult, 1)}
	select {
	case <-c.Stopping():
		return "", ErrCommitterStopped
	default:
	}
	select {
	case c.queue <- r:
	case <-c.Stopping():
		return "", ErrCommitterStopped
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case res := <-r.done:
		return res.outcome, res.err
	case <-c.Done():
		// Every committer returned: r was answered just now, or it was
		// queued after they drained the queue and will never be committed.
		select {
		case res := <-r.done:
			return res.outcome, res.err
		default:
			return "", ErrCommitterStopped
		}
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// work commits groups until the soft stop, then commits what is still
// queued; commits run on hard, cancelled when Stop's context runs out.
func (c *CreditCommitter) work(soft, hard context.Context) error {
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

// fill adds to first whatever else is queued, up to maxGroup.
func (c *CreditCommitter) fill(first *creditRequest) []*creditRequest {
	return batch.Gather(first, c.queue, c.maxGroup)
}

// commit commits group in one transaction, or each of its credits alone
// when that fails, and answers every caller. Callers' contexts are not
// used: a group must not be cancelled by one caller giving up.
func (c *CreditCommitter) commit(ctx context.Context, group []*creditRequest) {
	// One lock order for every group: wallets by owner and currency, then
	// payment; stable, so the first delivery of a message in the group is
	// the one that claims it.
	slices.SortStableFunc(group, func(a, b *creditRequest) int {
		return cmp.Or(cmp.Compare(a.cr.userID, b.cr.userID), cmp.Compare(a.cr.currency, b.cr.currency),
			cmp.Compare(a.cr.provider, b.cr.provider), cmp.Compare(a.cr.reference, b.cr.reference))
	})
	c.sizes.Observe(float64(len(group)))
	results := make([]creditResult, len(group))
	err := c.panics.Call(ctx, c.logger, "payout-worker/credit committer", func() error {
		if len(group) > 1 {
			err := c.commitGroup(ctx, group)
			if err == nil {
				for i, r := range group {
					results[i] = creditResult{outcome: r.cr.outcome()}
				}
				return nil
			}
			// One bad credit must not fail its neighbours: each alone.
			c.retried.Inc()
			c.logger.DebugContext(ctx, "credit group failed, committing its credits one by one",
				"credits", len(group), "code", database.Code(err), "error", err)
		}
		for i, r := range group {
			outcome, err := c.ledger.creditAlone(ctx, c.pool, r.cr)
			results[i] = creditResult{outcome: outcome, err: err}
		}
		return nil
	})
	for i, r := range group {
		if err != nil {
			results[i] = creditResult{err: err}
		}
		r.done <- results[i]
	}
}

// commitGroup sends the group's credits between BEGIN and COMMIT in one
// pipeline. It returns nil only when the transaction committed; otherwise
// the transaction was rolled back (or its connection is closed).
func (c *CreditCommitter) commitGroup(ctx context.Context, group []*creditRequest) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	for _, r := range group {
		if err := c.ledger.queue(ctx, b, r.cr); err != nil {
			return err
		}
	}
	committed := false
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		committed = ct.String() == "COMMIT"
		return nil
	})
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("credit group: %w", err)
	}
	defer conn.Release()
	err = conn.SendBatch(ctx, b).Close()
	if err == nil && committed {
		return nil
	}
	if err == nil {
		err = errors.New("the transaction was rolled back")
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		// A broken connection is closed on release instead.
		// Bounded: an unreachable Postgres must not hang the committer (or
		// its Stop); a connection that cannot roll back is closed instead.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackWait)
		if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
			_ = conn.Conn().Close(rctx)
		}
		cancel()
	}
	return fmt.Errorf("credit group of %d: %w", len(group), err)
}
