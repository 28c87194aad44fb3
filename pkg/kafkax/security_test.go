package kafkax_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/tlstest"
)

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
	pki := tlstest.New(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.ServerCertificate(t)}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.SeedTopics(1, "secured"),
		kfake.Superuser(kafkax.MechanismScramSHA512, "aegis", "s3cret"),
		kfake.Superuser(kafkax.MechanismPlain, "plainuser", "pl41n"),
	)
	require.NoError(t, err)
	t.Cleanup(c.Close) // after the parallel subtests, unlike defer

	good := envOf(map[string]string{
		"KAFKA_TLS_CA_FILE":    pki.CAFile,
		"KAFKA_SASL_MECHANISM": "scram-sha-512",
		"KAFKA_SASL_USERNAME":  "aegis",
		"KAFKA_SASL_PASSWORD":  "s3cret",
	})
	sec := kafkax.ReadSecurity(good)
	require.NoError(t, good.Err())
	require.Equal(t, "tls+sasl/SCRAM-SHA-512(user=aegis)", sec.String(), "the description names no secret")
	require.NoError(t, roundTrip(t, c.ListenAddrs(), sec))

	plain := envOf(map[string]string{
		"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": pki.CAFile, "KAFKA_TLS_CERT_FILE": pki.ClientCertFile,
		"KAFKA_TLS_KEY_FILE": pki.ClientKeyFile, "KAFKA_SASL_MECHANISM": "PLAIN",
		"KAFKA_SASL_USERNAME": "plainuser", "KAFKA_SASL_PASSWORD": "pl41n",
	})
	sec = kafkax.ReadSecurity(plain)
	require.NoError(t, plain.Err())
	require.Len(t, sec.TLS.Certificates, 1, "the client certificate is loaded for mutual TLS")
	require.NoError(t, roundTrip(t, c.ListenAddrs(), sec))

	t.Run("wrong password is refused", func(t *testing.T) {
		t.Parallel()
		bad := kafkax.ReadSecurity(envOf(map[string]string{
			"KAFKA_TLS_CA_FILE": pki.CAFile, "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
			"KAFKA_SASL_USERNAME": "aegis", "KAFKA_SASL_PASSWORD": "guess",
		}))
		require.Error(t, roundTrip(t, c.ListenAddrs(), bad))
	})
	t.Run("a broker signed by an unknown CA is refused", func(t *testing.T) {
		t.Parallel()
		other := tlstest.New(t)
		bad := kafkax.ReadSecurity(envOf(map[string]string{
			"KAFKA_TLS_CA_FILE": other.CAFile, "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
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
