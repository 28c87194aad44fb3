package payout

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/dbgauge"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout/sqlcdb"
)

// MetricReceivablesOpen is the gauge of users who owe money, per currency:
// the condition AegisReceivableOpen pages on (alert key receivable:<user>).
const MetricReceivablesOpen = "aegis_receivables_open"

// RegisterReceivableGauge registers on deps.Registerer
// aegis_receivables_open{currency}: how many users owe money after a refund
// or dispute took more than their wallet held (wallets.owed > 0), read from
// Postgres at each scrape (OpenReceivables), so every replica exports the
// same current figure and the page resolves when the last of them repaid.
// A read that fails exports nothing for that scrape.
func RegisterReceivableGauge(pool *pgxpool.Pool, deps lifecycle.Deps) error {
	deps = deps.WithDefaults()
	owing := prometheus.NewDesc(MetricReceivablesOpen,
		"Users who owe money after a refund or dispute took more than their wallet held, per currency, read from the "+
			"database at each scrape (every replica exports the same figure: take max).",
		[]string{"currency"}, nil)
	c := dbgauge.New("receivables", deps.Logger, func(ctx context.Context, emit dbgauge.Emit) error {
		rows, err := sqlcdb.New(pool).OpenReceivables(ctx)
		if err != nil {
			return fmt.Errorf("count the users who owe money: %w", err)
		}
		for _, r := range rows {
			emit(owing, float64(r.Owing), r.Currency)
		}
		return nil
	}, owing)
	if err := deps.Registerer.Register(c); err != nil {
		return fmt.Errorf("register the receivables gauge: %w", err)
	}
	return nil
}
