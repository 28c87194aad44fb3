package consume_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
)

// A record retried in place past StuckAfter blocks its partition; the worker
// logs it but raises no alert: dlq-admin's stall detector owns the
// partition-stalled page, so one stall pages once, from one service.
func TestABlockedPartitionIsNotPagedByTheWorker(t *testing.T) {
	t.Parallel()
	const stuckAfter = 3
	b := setup(t, consume.Config{StuckAfter: stuckAfter, RetryInPlaceAttempts: 50, RetryInPlaceFor: time.Minute},
		map[string]func(int) error{
			"down": func(n int) error {
				if n <= stuckAfter+2 {
					return &pgconn.PgError{Code: database.CodeAdminShutdown, Message: "admin shutdown"}
				}
				return nil
			},
		})
	b.produce("down")
	b.waitDone(t, "down")
	require.Greater(t, b.h.attempts("down"), stuckAfter, "the record was not retried past StuckAfter")
	families, err := b.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "aegis_alerts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				require.False(t, l.GetName() == "kind" && l.GetValue() == alert.KindConsumerStalled,
					"the worker raised %s", l.GetValue())
			}
		}
	}
}
