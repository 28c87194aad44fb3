package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
)

// With a Stripe key the PSP reconciliation runs at start; stopping the
// service mid-run stops within the grace and hands the run back for the
// next worker (requested again, not left running).
func TestRunStopsMidReconciliationAndHandsTheRunBack(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	hung := make(chan struct{}, 1)
	psp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // the PSP never answers the events list
		case hung <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer psp.Close()
	logs := &proctest.Logs{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, env(map[string]string{
			"DATABASE_URL":      db.URL,
			"HTTP_ADDR":         "127.0.0.1:0",
			"SHUTDOWN_GRACE":    "2s",
			"STRIPE_SECRET_KEY": "sk_test_run",
			"STRIPE_API_BASE":   psp.URL,
		}), logs)
	}()
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Fatalf("the scheduled run never asked the PSP:\n%s", logs.String())
	}
	var status string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT status FROM psp_reconciliation_runs`).Scan(&status))
	require.Equal(t, "running", status)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
	require.True(t, strings.Contains(logs.String(), "webhook-api stopped"), logs.String())
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT status FROM psp_reconciliation_runs`).Scan(&status))
	require.Equal(t, "requested", status, "handed back for the next worker")
}
