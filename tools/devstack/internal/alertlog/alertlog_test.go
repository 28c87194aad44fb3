package alertlog_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/tools/devstack/internal/alertlog"
)

// The lines pkg/alert writes, whole or prefixed as the stack prefixes a
// process's stderr, are read back with their key, service and runbook;
// other lines are not alerts.
func TestReadsWhatRaiseLogs(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	rec := alertlog.NewRecorder(&out)
	logger := slog.New(slog.NewJSONHandler(rec, nil)).With("service", "dlq-admin")
	a, err := alert.New(alert.Config{Source: "dlq-admin"}, lifecycle.Deps{Logger: logger, Registerer: prometheus.NewRegistry(), Clock: time.Now})
	require.NoError(t, err)
	logger.Info("dead-letter stored", "alert_key", "not an alert")
	a.Raise(context.Background(), alert.Alert{Key: alert.DeadLetterKey("aegis.transactions", "poison"), Severity: alert.Error,
		Summary: "dead letter on aegis.transactions (poison)", Details: map[string]any{"payout_id": "p-42"}})

	got := rec.Lines()
	require.Len(t, got, 1)
	require.Equal(t, "dlq-admin", got[0].Service)
	require.Equal(t, "dead_letter:aegis.transactions:poison", got[0].Key)
	require.Equal(t, "error", got[0].Severity)
	require.Equal(t, "AegisDeadLetterOpen", got[0].Rule)
	require.Equal(t, "docs/runbooks/AegisDeadLetterOpen.md", got[0].Runbook)
	require.Equal(t, 1, rec.Naming("p-42"))
	require.Contains(t, out.String(), "dead-letter stored", "the stream is passed on whole")

	prefixed := alertlog.All("payout-worker: " + got[0].Raw + "\nnot json\n")
	require.Len(t, prefixed, 1)
	require.Equal(t, got[0].Key, prefixed[0].Key)
}
