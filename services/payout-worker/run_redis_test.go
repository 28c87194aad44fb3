package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/pkg/tlstest"
)

func TestWorkerReachesRedisOverTLS(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err, "redis-server must be installed (scripts/devdeps.sh)")
	pki := tlstest.New(t)
	port := proctest.FreePort(t)
	proctest.Start(t, "redis-tls", bin, nil, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", pki.ServerCertFile, "--tls-key-file", pki.ServerKeyFile, "--tls-ca-cert-file", pki.CAFile,
		"--tls-auth-clients", "no", "--save", "", "--appendonly", "no")
	db := pgtest.New(t)
	cluster := kafkatest.NewCluster(t)

	readyz := func(env map[string]string) string {
		base := map[string]string{
			"DATABASE_URL":  db.URL,
			"HTTP_ADDR":     "127.0.0.1:0",
			"KAFKA_BROKERS": strings.Join(cluster.ListenAddrs(), ","),
			"REDIS_URLS":    "rediss://127.0.0.1:" + strconv.Itoa(port) + "/0",
		}
		for k, v := range env {
			base[k] = v
		}
		logs := &proctest.Logs{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, withEventKey(func(k string) string { return base[k] }), logs) }()
		defer func() {
			cancel()
			require.NoError(t, <-done)
		}()
		require.Eventually(t, func() bool { return logs.ListenAddr() != "" }, 30*time.Second, 10*time.Millisecond, logs.String())
		var body string
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + logs.ListenAddr() + "/readyz")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return strings.Contains(body, `"kafka":"ok"`) && strings.Contains(body, `"postgres":"ok"`)
		}, 30*time.Second, 50*time.Millisecond)
		// The pool's and the Kafka client's metrics are on the registry.
		resp, err := http.Get("http://" + logs.ListenAddr() + "/metrics")
		require.NoError(t, err)
		metrics, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Contains(t, string(metrics), "\naegis_db_pool_max_conns ")
		require.Contains(t, string(metrics), `aegis_kafka_connects_total{client="consumer"`)
		return body
	}

	require.Contains(t, readyz(map[string]string{"REDIS_TLS_CA_FILE": pki.CAFile}), `"redis":"ok"`)
	body := readyz(nil)
	require.NotContains(t, body, `"redis":"ok"`, "a certificate from an unknown CA is refused")
	require.Contains(t, body, "certificate")

	_, err = readConfig(withEventKey(func(k string) string {
		return map[string]string{"REDIS_TLS_CA_FILE": pki.CAFile, "REDIS_URL": "redis://127.0.0.1:6379/0"}[k]
	}))
	require.ErrorContains(t, err, "REDIS_TLS_CA_FILE is set but REDIS_URL node 1 is not rediss://")
}
