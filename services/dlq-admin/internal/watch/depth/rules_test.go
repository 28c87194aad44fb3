package depth_test

import (
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch/depth"
)

// rulesPath is the example rules file shipped beside the service.
const rulesPath = "../../../alerts/prometheus-rules.yml"

// exported lists the metrics Aegis exports that alerting rules may use,
// by the service or package that registers them. Keep it in step with the
// code: a rule on a metric nobody exports never fires.
func exported() map[string]string {
	return map[string]string{
		// dlq-admin (this module; checked against the registry below)
		"aegis_dlq_depth":                                      "dlq-admin monitor",
		"aegis_dlq_oldest_open_age_seconds":                    "dlq-admin monitor",
		"aegis_dlq_open_letters":                               "dlq-admin monitor",
		"aegis_reconciliation_discrepancies":                   "dlq-admin recon",
		"aegis_reconciliation_last_run_timestamp_seconds":      "dlq-admin recon",
		"aegis_reconciliation_runs_total":                      "dlq-admin recon",
		"aegis_dlq_ingested_total":                             "dlq-admin intake",
		"aegis_dlq_ingested_malformed_total":                   "dlq-admin intake",
		"aegis_dlq_stored_raw_total":                           "dlq-admin intake",
		"aegis_replay_jobs_abandoned_total":                    "dlq-admin replay",
		"aegis_consumer_group_lag":                             "dlq-admin stall",
		"aegis_consumer_group_last_progress_timestamp_seconds": "dlq-admin stall",
		"aegis_consumer_group_stalled":                         "dlq-admin stall",
		// pkg/consumer (every consumer-group loop: payout-worker, dlq-admin's intake and delivery)
		"aegis_consumer_messages_total":                  "pkg/consumer",
		"aegis_consumer_handle_seconds":                  "pkg/consumer",
		"aegis_consumer_retry_exhausted_total":           "pkg/consumer",
		"aegis_consumer_last_progress_timestamp_seconds": "pkg/consumer",
		"aegis_consumer_lag":                             "pkg/consumer",
		"aegis_consumer_dead_letter_publish_failing":     "pkg/consumer",
		// pkg/dlq (payout-worker, outbox-relay, webhook-api: the one dead-letter counter)
		"aegis_dead_letters_total": "pkg/dlq",
		// pkg/panics (every service)
		"aegis_panics_total": "pkg/panics",
		// pkg/alert, pkg/httpserver, pkg/breaker (every service)
		"aegis_alerts_total":                  "pkg/alert",
		"aegis_http_request_duration_seconds": "pkg/httpserver",
		"aegis_breaker_state":                 "pkg/breaker",
		"aegis_breaker_transitions_total":     "pkg/breaker",
		// outbox-relay
		"aegis_outbox_pending":                              "outbox-relay",
		"aegis_outbox_oldest_pending_age_seconds":           "outbox-relay",
		"aegis_outbox_published_total":                      "outbox-relay",
		"aegis_outbox_publish_failures_total":               "outbox-relay",
		"aegis_outbox_relay_last_success_timestamp_seconds": "outbox-relay",
		"aegis_outbound_attempts_total":                     "outbox-relay deliver",
		"aegis_outbound_attempt_seconds":                    "outbox-relay deliver",
		"aegis_outbound_pending":                            "outbox-relay deliver",
		"aegis_outbound_oldest_pending_seconds":             "outbox-relay deliver",
		"aegis_outbound_delivered_lag_seconds":              "outbox-relay deliver",
		"aegis_outbound_endpoints_disabled_total":           "outbox-relay deliver",
		"aegis_outbound_endpoints_disabled":                 "outbox-relay deliver",
		// payout-worker
		"aegis_psp_calls_total":                    "payout-worker",
		"aegis_payouts_finished_total":             "payout-worker",
		"aegis_payout_retries_total":               "payout-worker",
		"aegis_wallet_credits_total":               "payout-worker",
		"aegis_payout_oldest_age_seconds":          "payout-worker",
		"aegis_payout_overdue":                     "payout-worker",
		"aegis_payout_deadline_escalations_total":  "payout-worker",
		"aegis_psp_fees_read_to_timestamp_seconds": "payout-worker",
		"aegis_receivables_open":                   "payout-worker",
		// webhook-api
		"aegis_webhooks_total":                                    "webhook-api api",
		"aegis_webhooks_refused_total":                            "webhook-api api",
		"aegis_psp_reconciliation_runs_total":                     "webhook-api pspsync",
		"aegis_psp_reconciliation_last_success_timestamp_seconds": "webhook-api pspsync",
		"aegis_psp_disagreements_open":                            "webhook-api pspsync",

		"aegis_partitions_ahead_seconds":            "pkg/partition (webhook-api)",
		"aegis_partition_retention_overdue_seconds": "pkg/partition (webhook-api)",
		"aegis_partition_retention_seconds":         "pkg/partition (webhook-api)",
		"aegis_partitions":                          "pkg/partition (webhook-api)",
		"aegis_partition_keys_trimmed_total":        "pkg/partition (webhook-api)",
		"aegis_partition_keys_trim_behind_seconds":  "pkg/partition (webhook-api)",
		"aegis_partition_time_scale":                "pkg/partition (webhook-api)",
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var metricName = regexp.MustCompile(`\baegis_[a-z0-9_]+`)

// histograms are the exported histograms: a rule reads their _count, _sum
// and _bucket series.
var histograms = map[string]bool{"aegis_http_request_duration_seconds": true}

// seriesOf is the exported metric a series name belongs to.
func seriesOf(name string) string {
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && histograms[base] {
			return base
		}
	}
	return name
}

// promUp is Prometheus' own per-target series (AegisTargetDown, AegisServiceDown).
var promUp = regexp.MustCompile(`\bup\{service`)

func TestPrometheusRulesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(rulesPath)
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	require.NotEmpty(t, f.Groups)

	known := exported()
	exprs := map[string]string{}
	for _, g := range f.Groups {
		require.NotEmpty(t, g.Name)
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "every rule is an alert with a name")
			require.NotEmpty(t, r.Expr, r.Alert)
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			if r.For != "" {
				_, err := time.ParseDuration(r.For)
				require.NoError(t, err, r.Alert)
			}
			names := metricName.FindAllString(r.Expr, -1)
			require.True(t, len(names) > 0 || promUp.MatchString(r.Expr), "%s alerts on an Aegis metric or on up", r.Alert)
			for _, n := range names {
				_, ok := known[seriesOf(n)]
				require.True(t, ok, "%s uses %s, which Aegis does not export", r.Alert, n)
			}
			exprs[r.Alert] = r.Expr
		}
	}

	// The signals ops asked for are all covered.
	covered := func(pattern string) bool {
		re := regexp.MustCompile(pattern)
		for _, e := range exprs {
			if re.MatchString(e) {
				return true
			}
		}
		return false
	}
	for _, want := range []string{
		`aegis_dlq_depth\{status="open"\}`,
		`aegis_dlq_oldest_open_age_seconds`,
		`aegis_reconciliation_discrepancies\) > 0`,
		`aegis_outbox_pending`,
		`aegis_outbox_oldest_pending_age_seconds`,
		`aegis_breaker_state\) == 2`,
		`aegis_consumer_group_stalled\) == 1`,
		`aegis_panics_total`,
		`aegis_payout_oldest_age_seconds\{state="NEEDS_REVIEW"\}`,
		`absent\(up\{service="webhook-api"\} == 1\)`,
		`absent\(up\{service="outbox-relay"\} == 1\)`,
		`absent\(up\{service="payout-worker"\} == 1\)`,
		`absent\(up\{service="dlq-admin"\} == 1\)`,
		`aegis_webhooks_refused_total`,
		`aegis_http_request_duration_seconds_count\{status=~"5\.\."\}`,
		`aegis_psp_reconciliation_runs_total\{status="failed"\}`,
		`aegis_psp_reconciliation_last_success_timestamp_seconds`,
	} {
		require.True(t, covered(want), "no rule matches %s", want)
	}
}

// The dlq-admin metrics in the list are the ones its parts register.
func TestExportedListMatchesRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	_, err := depth.New(depth.Config{}, nil, nil, lifecycle.Deps{Logger: logger, Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	_, err = recon.New(nil, nil, lifecycle.Deps{Logger: logger, Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	// Vectors appear in Gather once they have a series; describe instead.
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	var registered []string
	for d := range ch {
		registered = append(registered, metricName.FindString(d.String()))
	}
	sort.Strings(registered)
	known := exported()
	for _, n := range registered {
		require.Contains(t, known, n)
	}
	require.Equal(t, []string{"aegis_dlq_depth", "aegis_dlq_oldest_open_age_seconds", "aegis_dlq_open_letters", "aegis_reconciliation_discrepancies",
		"aegis_reconciliation_last_run_timestamp_seconds", "aegis_reconciliation_runs_total"}, registered)
}
