package fees

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dbgauge"
	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/fees/sqlcdb"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

// Config tunes the collector.
type Config struct {
	// Every is how often a round runs (PSP_FEE_INTERVAL).
	Every time.Duration
	// Window is how far back the first round reads.
	Window time.Duration
	// Overlap: a round starts this long before the cursor, for balance
	// transactions Stripe dated before the previous round's end but listed
	// only after it.
	Overlap time.Duration
	// Grace: a round reads up to now minus this.
	Grace time.Duration
}

// DefaultConfig is a round every 10 minutes over what is older than a
// minute, overlapping the previous by 10 minutes; the first round reads a
// day back.
func DefaultConfig() Config {
	return Config{Every: 10 * time.Minute, Window: 24 * time.Hour, Overlap: 10 * time.Minute, Grace: time.Minute}
}

const lockName = "aegis:psp-fee-collector"

// Collector posts Stripe's fees.
type Collector struct {
	api    *stripeapi.Client
	pool   *pgxpool.Pool
	ledger *ledger.Ledger
	cfg    Config
	logger *slog.Logger
	now    func() time.Time
	posted prometheus.Counter
}

// New returns a collector reading Stripe through api.
func New(api *stripeapi.Client, pool *pgxpool.Pool, l *ledger.Ledger, cfg Config, logger *slog.Logger,
	reg prometheus.Registerer, now func() time.Time) (*Collector, error) {
	posted := prometheus.NewCounter(prometheus.CounterOpts{Name: "aegis_psp_fees_posted_total",
		Help: "Stripe fees read from its balance transactions and posted to the ledger.", ConstLabels: prometheus.Labels{"provider": "stripe"}})
	for _, c := range []prometheus.Collector{posted, readToGauge(pool, logger)} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register fee metric: %w", err)
		}
	}
	return &Collector{api: api, pool: pool, ledger: l, cfg: cfg, logger: logger, now: now, posted: posted}, nil
}

// readToGauge exports Stripe's cursor, the end of the last round that read
// its whole window, read from psp_fee_cursors at every scrape (a primary
// key lookup): a failing collector lets it age, which pages
// (AegisPSPFeesNotCollected). Every replica exports it, whichever ran the
// round, and a restarted one at once rather than a 0 until its first round
// (up to PSP_FEE_INTERVAL). Before the first round stores it, nothing.
func readToGauge(pool *pgxpool.Pool, logger *slog.Logger) *dbgauge.Collector {
	desc := prometheus.NewDesc("aegis_psp_fees_read_to_timestamp_seconds",
		"How far Stripe's balance transactions have been read and their fees posted (Unix time), as stored.",
		nil, prometheus.Labels{"provider": string(provider.Stripe)})
	return dbgauge.New("stripe fee cursor", logger, func(ctx context.Context, emit dbgauge.Emit) error {
		readTo, err := sqlcdb.New(pool).Cursor(ctx, string(provider.Stripe))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the stripe fee cursor: %w", err)
		}
		emit(desc, float64(readTo.Unix()))
		return nil
	}, desc)
}

// Round says what one round did.
type Round struct {
	From, To time.Time
	// Read counts the balance transactions listed; Posted the fees new to
	// the ledger.
	Read, Posted int
	// Skipped is true when another replica holds the round.
	Skipped bool
}

// Run rounds every cfg.Every until ctx ends.
func (c *Collector) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		r, err := c.Collect(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			c.logger.WarnContext(ctx, "stripe fee round failed; the next reads its window again", "error", err)
		case r.Posted > 0:
			c.logger.InfoContext(ctx, "stripe fees posted", "posted", r.Posted, "read", r.Read,
				"from", r.From, "to", r.To)
		}
	}
}

// fee is one fee to post.
type fee struct {
	txn      string
	amount   int64
	currency string
}

// Collect runs one round.
func (c *Collector) Collect(ctx context.Context) (Round, error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return Round{}, fmt.Errorf("fee round: acquire connection: %w", err)
	}
	defer conn.Release()
	q := sqlcdb.New(conn)
	got, err := q.Lock(ctx, lockName)
	if err != nil {
		return Round{}, fmt.Errorf("fee round: take the lock: %w", err)
	}
	if !got {
		return Round{Skipped: true}, nil
	}
	defer func() {
		// A session lock: a failed unlock ends with the connection.
		_ = q.Unlock(context.WithoutCancel(ctx), lockName)
	}()

	now := c.now()
	r := Round{From: now.Add(-c.cfg.Window), To: now.Add(-c.cfg.Grace)}
	cursor, err := q.Cursor(ctx, string(provider.Stripe))
	switch {
	case err == nil:
		r.From = cursor.Add(-c.cfg.Overlap)
	case !errors.Is(err, pgx.ErrNoRows):
		return r, fmt.Errorf("fee round: read the cursor: %w", err)
	}
	if !r.To.After(r.From) {
		return r, nil
	}
	var found []fee
	for bt, err := range c.api.BalanceTransactions(ctx, r.From, r.To) {
		if err != nil {
			return r, fmt.Errorf("fee round: list stripe balance transactions: %w", err)
		}
		r.Read++
		if ours(bt) {
			found = append(found, fee{txn: bt.ID, amount: bt.Fee, currency: strings.ToLower(string(bt.Currency))})
		}
	}
	err = database.InTx(ctx, c.pool, func(tx pgx.Tx) error {
		r.Posted = 0
		for _, f := range found {
			err := c.ledger.Fee(ctx, tx, string(provider.Stripe), f.txn, f.amount, f.currency)
			if errors.Is(err, ledger.ErrAlreadyPosted) {
				continue
			}
			if err != nil {
				return err
			}
			r.Posted++
		}
		return sqlcdb.New(tx).MoveCursor(ctx, sqlcdb.MoveCursorParams{Provider: string(provider.Stripe), ReadTo: r.To})
	})
	if err != nil {
		return r, fmt.Errorf("fee round: post fees: %w", err)
	}
	c.posted.Add(float64(r.Posted))
	return r, nil
}

// ours reports whether bt is a payment to one of our wallets with a fee:
// a charge (or payment) whose source, expanded, carries metadata user_id.
func ours(bt *stripe.BalanceTransaction) bool {
	if bt.Fee <= 0 || (bt.Type != stripe.BalanceTransactionTypeCharge && bt.Type != stripe.BalanceTransactionTypePayment) {
		return false
	}
	if bt.Source == nil || bt.Source.Charge == nil {
		return false
	}
	return bt.Source.Charge.Metadata["user_id"] != ""
}
