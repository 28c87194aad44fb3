package pspsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/pspsync"
)

// A run reads our payouts through payouts_for_api: with the grants
// webhook-api keeps after the next release's contract (no SELECT on
// payouts), it still finds a payout paid at the PSP and FAILED here (the
// PSP's objects looked up among ours) and one SUCCEEDED here that the PSP
// has no object for (ours checked at the PSP).
func TestRunComparesPayoutsWithTheGrantsLeftAfterTheContract(t *testing.T) {
	standIn := psptest.Start(t, map[string]string{"PSP_PAYSTACK_SECRET_KEY": paystackKey})
	db := pgtest.New(t)
	e := &env{t: t, db: db, psp: standIn}
	ctx := context.Background()
	failedHere, lost := uuid.NewString(), uuid.NewString()
	insertPayout(t, db, failedHere, "FAILED", "stripe")
	insertPayout(t, db, lost, "SUCCEEDED", "stripe")
	paid := stripeTransferAt(t, e, failedHere, failedHere, 1500, "usd", "acct_dave")
	_, err := db.Pool.Exec(ctx, `UPDATE payouts SET psp_reference = $2 WHERE id = $1`, failedHere, paid)
	require.NoError(t, err)
	runID := fixture.PSPRun{Trigger: "manual", RequestedBy: "test"}.Insert(t, db.Pool)
	db.AfterContract(t)

	api := db.As(t, migrations.RoleWebhookAPI)
	rec := pspsync.NewReconciler(pspsync.Config{Window: time.Hour, Grace: 0}, pspsync.NewRuns(api),
		ingest.NewStore(api, noNotify{}, time.Now), []pspsync.Source{pspsync.NewStripe(stripeapi.New(stripeKey, standIn.URL, nil))},
		lifecycle.Deps{Logger: quiet()})
	rep, err := rec.Run(ctx, runID, time.Now())
	require.NoError(t, err)
	byPayout := map[string]string{}
	for _, d := range rep.Disagreements {
		byPayout[d.PayoutID] = d.Kind
	}
	require.Equal(t, map[string]string{failedHere: pspsync.PaidNotSucceeded, lost: pspsync.SucceededNotPaid}, byPayout,
		"%+v", rep.Disagreements)
}
