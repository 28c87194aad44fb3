package database_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

func TestErrorClassificationOnARealServer(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()

	_, err := db.Pool.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g', 'e')`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g', 'e')`)
	require.True(t, database.IsUniqueViolation(err, "processed_events_pkey"), "got %v", err)
	require.False(t, database.IsUniqueViolation(err, "other"))
	require.False(t, database.IsTransient(err), "a unique violation is not worth retrying")

	_, err = db.Pool.Exec(ctx, `INSERT INTO wallets (kind, owner, currency, balance) VALUES ('user', 'u', 'usd', -1)`)
	require.True(t, database.IsCheckViolation(err, "wallets_user_balance_non_negative"), "got %v", err)

	shortCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = db.Pool.Exec(shortCtx, `SELECT pg_sleep(5)`)
	require.Error(t, err)
	require.True(t, database.IsTransient(err), "a timeout is transient: %v", err)

	canceled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	_, err = db.Pool.Exec(canceled, `SELECT 1`)
	require.False(t, database.IsTransient(err), "our own cancellation is never retried")

	_, err = database.Connect(ctx, "postgres://127.0.0.1:1/none?sslmode=disable&connect_timeout=1", database.Options{})
	require.Error(t, err)
	require.True(t, database.IsTransient(err), "connection refused is transient: %v", err)
}

func TestInTxCommitsAndRollsBack(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	insert := func(id string, fail error) error {
		return database.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g', $1)`, id); err != nil {
				return err
			}
			return fail
		})
	}
	require.NoError(t, insert("kept", nil))
	boom := errors.New("boom")
	require.ErrorIs(t, insert("dropped", boom), boom)
	require.Panics(t, func() { _ = database.InTx(ctx, db.Pool, func(tx pgx.Tx) error { panic("bug") }) })

	var ids []string
	rows, err := db.Pool.Query(ctx, `SELECT event_id FROM processed_events ORDER BY event_id`)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"kept"}, ids, fmt.Sprint(ids))
}
