package inbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
)

// Once applies a message's effect exactly once: the first delivery claims
// and applies it, a redelivery changes nothing, a failed effect leaves the
// message unclaimed (its redelivery applies it), and a nil effect claims.
func TestOnceAppliesTheEffectOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	msg := func(id string) inbox.Message {
		return inbox.Message{Topic: "t", Group: "g", Headers: map[string]string{kafkax.HeaderMessageID: id}}
	}
	claimed := func(m inbox.Message) bool {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx,
			"SELECT count(*) FROM processed_events WHERE consumer_group = $1 AND event_id = $2", m.Group, m.ID()).Scan(&n))
		return n == 1
	}

	applied := 0
	effect := func(pgx.Tx) error { applied++; return nil }
	m := msg("m1")
	require.NoError(t, inbox.InTx(ctx, db.Pool, m, effect))
	require.NoError(t, inbox.InTx(ctx, db.Pool, m, effect))
	require.Equal(t, 1, applied, "a redelivered message must not apply its effect again")
	require.True(t, claimed(m))

	failed := msg("m2")
	boom := errors.New("effect failed")
	require.ErrorIs(t, inbox.InTx(ctx, db.Pool, failed, func(pgx.Tx) error { return boom }), boom)
	require.False(t, claimed(failed), "a failed effect must leave the message unclaimed")
	require.NoError(t, inbox.InTx(ctx, db.Pool, failed, effect))
	require.Equal(t, 2, applied, "the redelivery of a failed message applies it")

	only := msg("m3")
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, inbox.Once(ctx, tx, only, nil))
	require.NoError(t, tx.Commit(ctx))
	require.True(t, claimed(only), "a nil effect still claims")
}
