package depth_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch/depth"
)

// A money event without webhook-api's proof pages as critical, under its
// own key; other dead letters stay errors.
func TestUnprovenMoneyEventsPageAsCritical(t *testing.T) {
	t.Parallel()
	a := depth.LetterAlert(store.Summary{OriginalTopic: kafkax.TopicWebhookPending, ErrorClass: string(eventproof.Class)})
	require.Equal(t, alert.Critical, a.Severity)
	require.Equal(t, alert.DeadLetterKey(kafkax.TopicWebhookPending, "unproven_event"), a.Key)
	require.Equal(t, alert.Error, depth.LetterAlert(store.Summary{OriginalTopic: kafkax.TopicWebhookPending, ErrorClass: "permanent"}).Severity)
}
