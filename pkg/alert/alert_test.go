package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

// Raise logs and counts every alert, and its log line names the rule that
// pages for the condition and that rule's runbook.
func TestRaiseLogsCountsAndNamesTheRunbook(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	a, err := New(Config{Source: "dlq-admin"}, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Registerer: prometheus.NewRegistry(), Clock: time.Now})
	require.NoError(t, err)
	key := DeadLetterKey("aegis.transactions", "permanent")
	for range 3 {
		a.Raise(context.Background(), Alert{Key: key, Severity: Error, Summary: "dead letter", Details: map[string]any{"dead_letter_id": "d1"}})
	}
	require.Equal(t, 3.0, testutil.ToFloat64(a.count.WithLabelValues(KindDeadLetter, "error")), "every alert is counted")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 3, "every alert is logged")
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
	require.Equal(t, "ALERT: dead letter", line["msg"])
	require.Equal(t, "ERROR", line["level"])
	require.Equal(t, key, line["alert_key"])
	require.Equal(t, "AegisDeadLetterOpen", line["alert_rule"])
	require.Equal(t, "docs/runbooks/AegisDeadLetterOpen.md", line["runbook"])
	require.Equal(t, "d1", line["dead_letter_id"])

	logs.Reset()
	a.Raise(context.Background(), Alert{Key: "something_new", Summary: "s"})
	require.Contains(t, logs.String(), `"runbook":"docs/operations/alerts.md"`, "a key of no known kind points to the alerts page")
}

// The webhook sink's settings were removed: a service configured with them
// refuses to start and says where pages go now.
func TestRemovedWebhookSettingsRefuseToStart(t *testing.T) {
	t.Parallel()
	for _, name := range RemovedSettings() {
		env := config.New(func(n string) string {
			if n == name {
				return "https://hooks.example/T0000/B0000/s3cr3t"
			}
			return ""
		})
		require.Equal(t, Config{Source: "payout-worker"}, ReadConfig(env, "payout-worker"))
		err := env.Err()
		require.Error(t, err, name)
		require.Contains(t, err.Error(), name+" was removed")
		require.Contains(t, err.Error(), "Alertmanager")
		require.Contains(t, err.Error(), "docs/operations/alerts.md")
		require.NotContains(t, err.Error(), "s3cr3t", "the value (a credential) is never quoted")
	}
	env := config.New(func(string) string { return "" })
	ReadConfig(env, "dlq-admin")
	require.NoError(t, env.Err())
}

// The counter is labelled by the key's kind, never the whole key: a key
// carrying a user id must not become a series per user.
func TestTheCounterIsLabelledByKindNotKey(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	a, err := New(Config{Source: "payout-worker"}, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	for _, user := range []string{"user-41", "user-42"} {
		a.Raise(context.Background(), Alert{Key: ReceivableKey(user), Severity: Warning, Summary: "receivable"})
	}
	a.Raise(context.Background(), Alert{Key: "made-up:thing", Summary: "unknown"})
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := []string{}
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(labels, ",")] = m.GetCounter().GetValue()
		}
	}
	require.Equal(t, map[string]float64{"kind=receivable,severity=warning": 2, "kind=other,severity=error": 1}, got)
}
