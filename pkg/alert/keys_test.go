package alert_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/alert"
)

// The keys are the ones dashboards, runbooks and PagerDuty incidents know;
// a changed format would open new incidents for old problems.
func TestKeys(t *testing.T) {
	t.Parallel()
	require.Equal(t, "dead_letter:aegis.transactions:permanent", alert.DeadLetterKey("aegis.transactions", "permanent"))
	require.Equal(t, "dead_letter_publish_failed:aegis.transactions", alert.DeadLetterPublishFailedKey("aegis.transactions"))
	require.Equal(t, "dlq_depth:aegis.webhook.pending", alert.DLQDepthKey("aegis.webhook.pending"))
	require.Equal(t, "consumer_stalled:payout-worker:aegis.transactions:3",
		alert.PartitionStalledKey("payout-worker", "aegis.transactions", 3))
	require.Equal(t, "receivable:alice", alert.ReceivableKey("alice"))
}
