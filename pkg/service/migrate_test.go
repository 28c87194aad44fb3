package service

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// `<binary> migrate` holds the contract migration (the last, 000056) back
// and says so in its log; `<binary> migrate --contract` applies it. A test
// binary is release "dev", which no later migrate differs from.
func TestMigrateHoldsContractMigrationsUnlessAsked(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Empty(t)
	require.NoError(t, migrations.UpTo(dbURL, 43))
	getenv := func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] }
	run := func(context.Context, func(string) string, io.Writer) error {
		t.Error("migrate must not run the service")
		return nil
	}
	version := func() int {
		conn, err := pgx.Connect(ctx, dbURL)
		require.NoError(t, err)
		defer conn.Close(ctx)
		var v int
		require.NoError(t, conn.QueryRow(ctx, `SELECT version FROM schema_migrations`).Scan(&v))
		return v
	}

	var out strings.Builder
	require.NoError(t, dispatch(ctx, "webhook-api", []string{"migrate"}, run, getenv, &out))
	require.Equal(t, 55, version())
	require.Contains(t, out.String(), "contract migration held back until the next release")
	require.Contains(t, out.String(), `"migration":56`)

	out.Reset()
	require.NoError(t, dispatch(ctx, "webhook-api", []string{"migrate", "--contract"}, run, getenv, &out))
	require.Equal(t, 56, version())
	require.Contains(t, out.String(), "contract migration applied")

	err := dispatch(ctx, "webhook-api", []string{"migrate", "--contracts"}, run, getenv, io.Discard)
	require.ErrorContains(t, err, "--contract")
}
