package database_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/tlstest"
)

// TestTLSThroughDatabaseURL shows that DATABASE_URL's sslmode and
// sslrootcert reach the connection: a managed Postgres wants
// sslmode=verify-full with its CA. Debian's server has TLS on with a
// self-signed certificate.
func TestTLSThroughDatabaseURL(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	var ssl string
	require.NoError(t, db.Pool.QueryRow(ctx, `SHOW ssl`).Scan(&ssl))
	if ssl != "on" {
		t.Skip("the local Postgres has ssl off; nothing to connect to over TLS")
	}
	withParams := func(params map[string]string) string {
		u, err := url.Parse(db.URL)
		require.NoError(t, err)
		q := u.Query()
		for k, v := range params {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	encrypted := func(databaseURL string) (bool, error) {
		pool, err := database.Connect(ctx, databaseURL, database.Options{})
		if err != nil {
			return false, err
		}
		defer pool.Close()
		var on bool
		err = pool.QueryRow(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&on)
		return on, err
	}

	on, err := encrypted(withParams(map[string]string{"sslmode": "require"}))
	require.NoError(t, err)
	require.True(t, on, "sslmode=require encrypts")
	on, err = encrypted(withParams(map[string]string{"sslmode": "disable"}))
	require.NoError(t, err)
	require.False(t, on)

	// verify-full against a CA that did not sign the server: refused.
	_, err = encrypted(withParams(map[string]string{"sslmode": "verify-full", "sslrootcert": tlstest.New(t).CAFile}))
	require.Error(t, err, "a server certificate the CA did not sign is refused")
	require.Contains(t, err.Error(), "certificate")
}
