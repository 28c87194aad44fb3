package payout

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/dbgauge"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout/sqlcdb"
)

// RegisterAgeGauges registers on deps.Registerer the age gauges of the
// unfinished payouts, aegis_payout_oldest_age_seconds{state} and
// aegis_payout_overdue{state} (past d's deadline), read from Postgres at
// each scrape: one statement, an index probe and a range scan of the
// overdue payouts per state (PayoutAges). Every replica exports the same,
// current figures, whichever holds the sweep lock: a replica's memory of
// its last sweep would keep an old age after another took over the sweep,
// and the alerts, taking the max, would fire on it. A read that fails
// exports nothing for that scrape.
func RegisterAgeGauges(pool *pgxpool.Pool, d Deadlines, deps lifecycle.Deps) error {
	deps = deps.WithDefaults()
	oldest := prometheus.NewDesc("aegis_payout_oldest_age_seconds",
		"How long the oldest payout in each unfinished state has been in it (0: none), read from the database at each scrape.",
		[]string{"state"}, nil)
	overdue := prometheus.NewDesc("aegis_payout_overdue",
		"Payouts in each unfinished state past that state's deadline, read from the database at each scrape.",
		[]string{"state"}, nil)
	c := dbgauge.New("payout ages", deps.Logger, func(ctx context.Context, emit dbgauge.Emit) error {
		// Postgres keeps microseconds: an empty state's "oldest" is now, to
		// the microsecond, and its age 0.
		now := deps.Clock().Truncate(time.Microsecond)
		rows, err := sqlcdb.New(pool).PayoutAges(ctx, sqlcdb.PayoutAgesParams{Now: now,
			InitializedBefore: now.Add(-d.For(Initialized)), SendingBefore: now.Add(-d.For(Sending)),
			RetryingBefore: now.Add(-d.For(Retrying)), PendingBefore: now.Add(-d.For(Awaiting)),
			ReviewBefore: now.Add(-d.For(NeedsReview))})
		if err != nil {
			return fmt.Errorf("measure the age of unfinished payouts: %w", err)
		}
		measured := make(map[Status]sqlcdb.PayoutAgesRow, len(rows))
		for _, r := range rows {
			measured[Status(r.Status)] = r
		}
		for _, s := range unfinished() {
			r, ok := measured[s]
			if !ok {
				return fmt.Errorf("measure the age of unfinished payouts: PayoutAges does not measure %s", s)
			}
			emit(oldest, max(now.Sub(r.Oldest).Seconds(), 0), string(s))
			emit(overdue, float64(r.Overdue), string(s))
		}
		return nil
	}, oldest, overdue)
	if err := deps.Registerer.Register(c); err != nil {
		return fmt.Errorf("register payout age gauges: %w", err)
	}
	return nil
}
