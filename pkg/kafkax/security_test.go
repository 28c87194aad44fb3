package kafkax_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// testPKI is a CA and a broker certificate for 127.0.0.1, as PEM files.
type testPKI struct {
	caFile     string
	serverCert tls.Certificate
	clientCert string
	clientKey  string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aegis test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	leaf := func(name string, usage x509.ExtKeyUsage, serial int64) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	p := testPKI{caFile: write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))}
	sc, sk := leaf("broker", x509.ExtKeyUsageServerAuth, 2)
	p.serverCert, err = tls.X509KeyPair(sc, sk)
	require.NoError(t, err)
	cc, ck := leaf("payout-worker", x509.ExtKeyUsageClientAuth, 3)
	p.clientCert, p.clientKey = write("client.pem", cc), write("client-key.pem", ck)
	return p
}

func envOf(m map[string]string) *config.Env {
	return config.New(func(k string) string { return m[k] })
}

// roundTrip produces one record and consumes it back through a client with
// sec's options, the way the services build theirs.
func roundTrip(t *testing.T, brokers []string, sec kafkax.Security) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := append([]kgo.Opt{kgo.ConsumeTopics("secured"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequestRetries(1)}, sec.Opts()...)
	cl, err := kafkax.NewClient(brokers, logger, opts...)
	require.NoError(t, err)
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secured", Value: []byte("money")}).FirstErr(); err != nil {
		return err
	}
	fetches := cl.PollFetches(ctx)
	if err := fetches.Err0(); err != nil {
		return err
	}
	recs := fetches.Records()
	require.NotEmpty(t, recs)
	require.Equal(t, "money", string(recs[0].Value))
	return nil
}

func TestSecurityTLSAndSCRAMAgainstASecuredBroker(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.serverCert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.SeedTopics(1, "secured"),
		kfake.Superuser(kafkax.MechanismScramSHA512, "aegis", "s3cret"),
		kfake.Superuser(kafkax.MechanismPlain, "plainuser", "pl41n"),
	)
	require.NoError(t, err)
	t.Cleanup(c.Close) // after the parallel subtests, unlike defer

	good := envOf(map[string]string{
		"KAFKA_TLS_CA_FILE":    pki.caFile,
		"KAFKA_SASL_MECHANISM": "scram-sha-512",
		"KAFKA_SASL_USERNAME":  "aegis",
		"KAFKA_SASL_PASSWORD":  "s3cret",
	})
	sec := kafkax.ReadSecurity(good)
	require.NoError(t, good.Err())
	require.Equal(t, "tls+sasl/SCRAM-SHA-512(user=aegis)", sec.String(), "the description names no secret")
	require.NoError(t, roundTrip(t, c.ListenAddrs(), sec))

	plain := envOf(map[string]string{
		"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": pki.caFile, "KAFKA_TLS_CERT_FILE": pki.clientCert,
		"KAFKA_TLS_KEY_FILE": pki.clientKey, "KAFKA_SASL_MECHANISM": "PLAIN",
		"KAFKA_SASL_USERNAME": "plainuser", "KAFKA_SASL_PASSWORD": "pl41n",
	})
	sec = kafkax.ReadSecurity(plain)
	require.NoError(t, plain.Err())
	require.Len(t, sec.TLS.Certificates, 1, "the client certificate is loaded for mutual TLS")
	require.NoError(t, roundTrip(t, c.ListenAddrs(), sec))

	t.Run("wrong password is refused", func(t *testing.T) {
		t.Parallel()
		bad := kafkax.ReadSecurity(envOf(map[string]string{
			"KAFKA_TLS_CA_FILE": pki.caFile, "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
			"KAFKA_SASL_USERNAME": "aegis", "KAFKA_SASL_PASSWORD": "guess",
		}))
		require.Error(t, roundTrip(t, c.ListenAddrs(), bad))
	})
	t.Run("a broker signed by an unknown CA is refused", func(t *testing.T) {
		t.Parallel()
		other := newTestPKI(t)
		bad := kafkax.ReadSecurity(envOf(map[string]string{
			"KAFKA_TLS_CA_FILE": other.caFile, "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
			"KAFKA_SASL_USERNAME": "aegis", "KAFKA_SASL_PASSWORD": "s3cret",
		}))
		require.Error(t, roundTrip(t, c.ListenAddrs(), bad))
	})
	t.Run("plaintext to a TLS broker fails", func(t *testing.T) {
		t.Parallel()
		require.Error(t, roundTrip(t, c.ListenAddrs(), kafkax.Security{}))
	})
}

func TestReadSecurityNamesTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"KAFKA_SASL_MECHANISM": "GSSAPI", "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"},
			"KAFKA_SASL_MECHANISM must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
		{map[string]string{"KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"},
			"KAFKA_SASL_MECHANISM=PLAIN sends the password in clear"},
		{map[string]string{"KAFKA_SASL_MECHANISM": "SCRAM-SHA-256", "KAFKA_SASL_USERNAME": "u"},
			"needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD"},
		{map[string]string{"KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"}, "need KAFKA_SASL_MECHANISM"},
		{map[string]string{"KAFKA_TLS_CA_FILE": "/nonexistent/ca.pem"}, "KAFKA_TLS_CA_FILE"},
		{map[string]string{"KAFKA_TLS_CERT_FILE": "/tmp/x.pem"}, "KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE go together"},
		{map[string]string{"KAFKA_TLS": "maybe"}, "KAFKA_TLS"},
	} {
		env := envOf(tc.env)
		kafkax.ReadSecurity(env)
		require.ErrorContains(t, env.Err(), tc.want, "%v", tc.env)
	}

	env := envOf(map[string]string{"KAFKA_SASL_PASSWORD": "hunter2", "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256"})
	sec := kafkax.ReadSecurity(env)
	require.NoError(t, env.Err(), "SCRAM over plaintext is allowed: the password never crosses the wire")
	require.NotContains(t, sec.String(), "hunter2")
	require.Empty(t, kafkax.ReadSecurity(envOf(nil)).Opts(), "unset means plaintext, as today")
}
