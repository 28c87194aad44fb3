package database_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	require.False(t, database.IsPermanent(err), "a statement that never reached the server is not refused for what it is")
}

// TestPermanentErrorsOnARealServer: statements Postgres refuses for their
// content fail every time, so a consumer must not retry them in place.
func TestPermanentErrorsOnARealServer(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	cases := []struct {
		name, sql string
		args      []any
		code      string
	}{
		{"bigint overflow", `SELECT $1::bigint + $1::bigint`, []any{int64(9_000_000_000_000_000_000)}, database.CodeNumericOutOfRange},
		{"NUL in jsonb", `SELECT $1::jsonb`, []any{`{"a":"\u0000"}`}, database.CodeUntranslatable},
		{"index row too large", `INSERT INTO transaction_outbox (topic, event_type, partition_key, payload)
			VALUES ('t', 'e', $1, '{}')`, []any{strings.Repeat("x", 1<<20)}, database.CodeProgramLimitExceeded},
		{"check violation", `INSERT INTO wallets (kind, owner, currency) VALUES ('user', 'u', 'USD')`, nil, database.CodeCheckViolation},
		{"division by zero", `SELECT 1/0`, nil, database.CodeDivisionByZero},
	}
	for _, c := range cases {
		_, err := db.Pool.Exec(ctx, c.sql, c.args...)
		require.Error(t, err, c.name)
		if c.code != "" {
			require.Equal(t, c.code, database.Code(err), c.name)
		}
		require.True(t, database.IsPermanent(err), "%s: %v", c.name, err)
		require.False(t, database.IsTransient(err), "%s: %v", c.name, err)
		require.True(t, database.RefusesData(err), "%s: %v", c.name, err)
	}

	// Refused, but not for the data: the deployment is broken (a missing
	// table) or the row is a duplicate the caller expects.
	_, err := db.Pool.Exec(ctx, `SELECT * FROM no_such_table`)
	require.True(t, database.IsPermanent(err))
	require.False(t, database.RefusesData(err), "an undefined table is not the sender's fault: %v", err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g', 'd'), ('g', 'd')`)
	require.True(t, database.IsUniqueViolation(err, ""))
	require.False(t, database.RefusesData(err), "a duplicate is answered as one, not refused")
	// A row past the last partition of webhook_events: its partitions are
	// missing, the data is fine.
	_, err = db.Pool.Exec(ctx, `INSERT INTO webhook_events (provider, event_id, event_type, payload, correlation_id, received_at)
		VALUES ('stripe', 'evt_far', 't', '{}', 'c', now() + interval '400 days')`)
	require.True(t, database.NoPartition(err), "%v", err)
	require.False(t, database.RefusesData(err), "no partition is not the sender's fault: %v", err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO webhook_events (provider, event_id, event_type, payload, correlation_id)
		VALUES ('nobody', 'evt_check', 't', '{}', 'c')`)
	require.False(t, database.NoPartition(err), "a CHECK constraint names itself: %v", err)
	require.True(t, database.RefusesData(err), "%v", err)

	// A serialization failure is the opposite: the same statement may
	// succeed on the next try.
	tx1, err := db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	require.NoError(t, err)
	defer tx1.Rollback(ctx)
	tx2, err := db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	require.NoError(t, err)
	defer tx2.Rollback(ctx)
	for _, tx := range []pgx.Tx{tx1, tx2} {
		_, err := tx.Exec(ctx, `SELECT count(*) FROM processed_events`)
		require.NoError(t, err)
	}
	_, err = tx1.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g', 'one')`)
	require.NoError(t, err)
	_, err = tx2.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g', 'two')`)
	require.NoError(t, err)
	require.NoError(t, tx1.Commit(ctx))
	err = tx2.Commit(ctx)
	require.Error(t, err)
	require.Equal(t, database.CodeSerializationFailure, database.Code(err))
	require.True(t, database.IsTransient(err))
	require.False(t, database.IsPermanent(err))
	require.False(t, database.RefusesData(err))
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
