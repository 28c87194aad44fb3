//go:build !chaos

package consume_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
)

// A production build has no planted defect: with the chaos build's switch
// (and the variable that once switched it) set, a Postgres refusal is still
// dead-lettered at once, and nothing retries it.
func TestTheSwitchOfThePlantedPoisonRetryDoesNothingOutsideTheChaosBuild(t *testing.T) {
	t.Setenv("AEGIS_PLANT_POISON_RETRY", "1")
	t.Setenv("WORKER_PLANT_POISON_RETRY", "true")
	b := setup(t, consume.Config{RetryInPlaceAttempts: 3}, map[string]func(int) error{
		"overflow": func(int) error {
			return &pgconn.PgError{Code: database.CodeNumericOutOfRange, Message: "bigint out of range"}
		},
	})
	b.produce("overflow")
	l := b.deadLetters(t, 1)[0]
	require.Equal(t, "overflow", l.PartitionKey)
	require.Equal(t, "permanent", l.ErrorClass)
	require.Equal(t, 1, b.h.attempts("overflow"))
}
