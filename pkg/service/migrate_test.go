package service

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

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
	admin, err := pgx.Connect(ctx, pgtest.AdminURL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	name := fmt.Sprintf("aegis_migrate_%d", time.Now().UnixNano())
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), pgtest.AdminURL())
		if err != nil {
			t.Logf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(pgtest.AdminURL())
	require.NoError(t, err)
	u.Path = "/" + name
	dbURL := u.String()
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

	err = dispatch(ctx, "webhook-api", []string{"migrate", "--contracts"}, run, getenv, io.Discard)
	require.ErrorContains(t, err, "--contract")
}
