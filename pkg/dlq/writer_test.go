package dlq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

func counted(t *testing.T, reg *prometheus.Registry, source, topic, class string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != dlq.MetricName {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["source"] == source && l["topic"] == topic && l["class"] == class {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Components of one service share the counter; a second writer on the
// same registry is no registration error.
func TestWritersShareOneCounter(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	a, err := dlq.NewWriter("payout-worker", lifecycle.Deps{Registerer: reg})
	require.NoError(t, err)
	b, err := dlq.NewWriter("payout-worker", lifecycle.Deps{Registerer: reg})
	require.NoError(t, err)
	l := consumerLetter()
	a.Written(context.Background(), l)
	b.Written(context.Background(), l)
	require.Equal(t, 2.0, counted(t, reg, dlq.SourceConsumer, l.OriginalTopic, l.ErrorClass))
	require.Equal(t, 1, testutil.CollectAndCount(reg, dlq.MetricName))
}

// Stage writes the letter, with its headers, to the outbox in the
// caller's transaction and counts it; a rolled back transaction leaves no
// row. An undecodable payload is a Poison error and writes nothing.
func TestStageWritesTheOutboxRowInTheTransaction(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	w, err := dlq.NewWriter("payout-worker", lifecycle.Deps{Registerer: reg})
	require.NoError(t, err)
	now := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	l := consumerLetter()
	l.RetryHistory = nil
	l = l.WithFailure(dlq.Failure{Err: errors.New("refused"), Class: errclass.Permanent}, now)
	require.Len(t, l.RetryHistory, 1, "a failure without history gets one attempt")
	require.True(t, l.FirstFailureAt.Equal(now))

	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Stage(ctx, tx, l))
	require.NoError(t, tx.Rollback(ctx))
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM transaction_outbox`).Scan(&n))
	require.Zero(t, n)

	require.NoError(t, pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { return w.Stage(ctx, tx, l) }))
	var topic, class, offset string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT topic, headers->>'error_class', headers->>'original_offset' FROM transaction_outbox`).
		Scan(&topic, &class, &offset))
	require.Equal(t, "aegis.transactions.dlq", topic)
	require.Equal(t, "permanent", class)
	require.Equal(t, "41", offset)
	require.Equal(t, 2.0, counted(t, reg, dlq.SourceConsumer, "aegis.transactions", "permanent"))

	bad := l
	bad.Payload = []byte{0xff}
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { return w.Stage(ctx, tx, bad) })
	require.Equal(t, errclass.Poison, errclass.Of(err))
}
