package database_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// The statement as sqlc generates it: its own parameter is $1, the
// template's named ones are numbered after it.
const countWallets = `-- name: CountWallets :one
SELECT count(*) FROM wallets WHERE currency = $1 AND /* TEMPLATE_BEGIN: filters */ true /* TEMPLATE_END */`

func TestTemplatedFillsTheFiltersAtRunTime(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO wallets (kind, owner, currency) VALUES
		('user', 'u1', 'usd'), ('user', 'u2', 'usd'), ('system', 'holds', 'usd'), ('user', 'u1', 'eur')`)
	require.NoError(t, err)
	q := database.NewTemplated(db.Pool)
	count := func(ctx context.Context) int64 {
		var n int64
		require.NoError(t, q.QueryRow(ctx, countWallets, "usd").Scan(&n))
		return n
	}
	require.EqualValues(t, 3, count(database.WithTemplate(ctx, "filters", "true", nil)))
	require.EqualValues(t, 2, count(database.WithTemplate(ctx, "filters", "kind = @kind", map[string]any{"kind": "user"})))
	require.EqualValues(t, 1, count(database.WithTemplate(ctx, "filters", "kind = @kind AND owner = @owner",
		map[string]any{"kind": "user", "owner": "u2"})))

	var n int64
	err = q.QueryRow(ctx, countWallets, "usd").Scan(&n)
	require.ErrorContains(t, err, "template", "a template without its text fails, not runs")
}
