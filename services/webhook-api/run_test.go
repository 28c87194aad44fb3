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

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
)

// Every goroutine run started (HTTP server, committers, notifier) has
// returned when it does, the notifier's included.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string {
	return withEventKey(func(k string) string { return m[k] })
}

func TestRunServesAndStopsWithinGrace(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	logs := &proctest.Logs{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, env(map[string]string{
			"DATABASE_URL":   db.URL,
			"HTTP_ADDR":      "127.0.0.1:0",
			"SHUTDOWN_GRACE": "2s",
		}), logs)
	}()
	require.Eventually(t, func() bool { return logs.ListenAddr() != "" }, 30*time.Second, 10*time.Millisecond)
	resp, err := http.Get("http://" + logs.ListenAddr() + "/readyz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	// The pool's metrics are on the service's registry.
	resp, err = http.Get("http://" + logs.ListenAddr() + "/metrics")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), "\naegis_db_pool_max_conns ")
	require.Contains(t, string(body), "\naegis_db_pool_acquires_total ")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
	require.True(t, strings.Contains(logs.String(), "webhook-api stopped"), logs.String())
}
