package database_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/pgtest"
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
	_, err = encrypted(withParams(map[string]string{"sslmode": "verify-full", "sslrootcert": otherCA(t)}))
	require.Error(t, err, "a server certificate the CA did not sign is refused")
	require.Contains(t, err.Error(), "certificate")
}

func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the server's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return p
}
