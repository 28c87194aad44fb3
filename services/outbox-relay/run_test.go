package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
)

// Every goroutine run started (relay loops, LISTEN, retention, stats, HTTP)
// has returned when it does.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRunServesAndStopsWithinGrace(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cluster := kafkatest.NewCluster(t)
	logs := &proctest.Logs{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, env(map[string]string{
			"DATABASE_URL":   db.URL,
			"HTTP_ADDR":      "127.0.0.1:0",
			"KAFKA_BROKERS":  strings.Join(cluster.ListenAddrs(), ","),
			"SHUTDOWN_GRACE": "3s",
		}), logs)
	}()
	require.Eventually(t, func() bool { return logs.ListenAddr() != "" }, 30*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + logs.ListenAddr() + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond)
	// The pool's and the Kafka client's metrics are on the service's
	// registry (/readyz pinged both).
	resp, err := http.Get("http://" + logs.ListenAddr() + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Contains(t, string(metrics), "\naegis_db_pool_max_conns 16\n")
	require.Contains(t, string(metrics), `aegis_kafka_connects_total{client="relay"`)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
	require.Contains(t, logs.String(), "outbox-relay stopped")
}
