//go:build chaos

package consume_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
)

// The chaos build's planted defect (AEGIS_PLANT_POISON_RETRY=1) retries a
// Postgres refusal in place past the bound and never dead-letters it: the
// behaviour the chaos suite's poison check must catch.
func TestPlantedPoisonRetriesARefusalForever(t *testing.T) {
	t.Setenv("AEGIS_PLANT_POISON_RETRY", "1")
	b := setup(t, consume.Config{RetryInPlaceAttempts: 3}, map[string]func(int) error{
		"overflow": func(int) error {
			return &pgconn.PgError{Code: database.CodeNumericOutOfRange, Message: "bigint out of range"}
		},
	})
	b.produce("overflow")
	require.Eventually(t, func() bool { return b.h.attempts("overflow") > 10 }, 10*time.Second, 10*time.Millisecond,
		"the planted defect retries past the bound")
	recs := kafkatest.ReadAll(t, b.kafka, kafkax.DLQTopic(kafkax.TopicWebhookPending), 1, 200*time.Millisecond)
	require.Empty(t, recs)
}
