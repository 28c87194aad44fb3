package alert_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/eventproof"
)

// The keys are the ones dashboards, runbooks and log searches know.
func TestKeys(t *testing.T) {
	t.Parallel()
	require.Equal(t, "dead_letter:aegis.transactions:permanent", alert.DeadLetterKey("aegis.transactions", "permanent"))
	require.Equal(t, "dead_letter_publish_failed:aegis.transactions", alert.DeadLetterPublishFailedKey("aegis.transactions"))
	require.Equal(t, "dlq_depth:aegis.webhook.pending", alert.DLQDepthKey("aegis.webhook.pending"))
	require.Equal(t, "consumer_stalled:payout-worker:aegis.transactions:3",
		alert.PartitionStalledKey("payout-worker", "aegis.transactions", 3))
	require.Equal(t, "receivable:alice", alert.ReceivableKey("alice"))
	require.Equal(t, "outbound-endpoint-disabled:e1", alert.OutboundEndpointDisabledKey("e1"))
	require.Equal(t, string(eventproof.Class), alert.UnprovenEventClass)
}

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// ruleNames reads the alerting rules' names.
func ruleNames(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "services", "dlq-admin", "alerts", "prometheus-rules.yml"))
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &f))
	names := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names[r.Alert] = true
		}
	}
	return names
}

// Every kind of key is a condition a Prometheus rule pages for (the one
// paging path), and that rule has its runbook page: Raise's log line points
// there.
func TestEveryKeyKindHasARuleAndARunbook(t *testing.T) {
	t.Parallel()
	rules := ruleNames(t)
	keys := []string{
		alert.DeadLetterKey("aegis.transactions", "permanent"),
		alert.DeadLetterKey("aegis.webhook.pending", alert.UnprovenEventClass),
		alert.DeadLetterPublishFailedKey("aegis.transactions"),
		alert.DLQDepthKey("aegis.transactions"),
		alert.PartitionStalledKey("payout-worker", "aegis.transactions", 0),
		alert.ReceivableKey("u1"),
		alert.OutboundEndpointDisabledKey("e1"),
	}
	for _, kind := range alert.Kinds() {
		keys = append(keys, kind+":x") // every kind, with or without a subject
		keys = append(keys, kind)
	}
	for _, key := range keys {
		rule := alert.Rule(key)
		require.NotEmpty(t, rule, "key %s has no rule", key)
		require.True(t, rules[rule], "key %s pages through %s, which prometheus-rules.yml does not define", key, rule)
		_, err := os.Stat(filepath.Join(repoRoot, alert.Runbook(rule)))
		require.NoError(t, err, "key %s: the runbook of %s", key, rule)
	}
	require.Equal(t, "AegisDeadLetterUnprovenEvent", alert.Rule(alert.DeadLetterKey("aegis.transactions", "unproven_event")))
	require.Equal(t, "AegisDeadLetterOpen", alert.Rule(alert.DeadLetterKey("aegis.transactions", "permanent")))
	require.Empty(t, alert.Rule("no_such_kind:x"))
}
