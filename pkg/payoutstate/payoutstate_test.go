package payoutstate_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// The states are the ones the payouts.status CHECK constraint allows: a
// state added to one and not the other fails here.
func TestStatesAreTheCheckConstraint(t *testing.T) {
	db := pgtest.New(t)
	want := payoutstate.Names(payoutstate.Status.Valid)
	slices.Sort(want)
	require.Equal(t, want, db.CheckValues(t, "payouts", "status"))
	require.Len(t, payoutstate.All(), len(want), "All lists each state once")
	require.False(t, payoutstate.Status("PAID").Valid())
}

func TestMeanings(t *testing.T) {
	names := func(has func(payoutstate.Status) bool) []string { return payoutstate.Names(has) }
	require.Equal(t, []string{"SUCCEEDED", "FAILED", "FINALIZED"}, names(payoutstate.Status.Final))
	require.Equal(t, []string{"SENT_TO_GATEWAY", "AWAITING_RESPONSE"}, names(payoutstate.Status.AtPSP))
	require.Equal(t, []string{"SENT_TO_GATEWAY", "AWAITING_RESPONSE", "SUCCEEDED", "FAILED", "FINALIZED"},
		names(payoutstate.Status.IgnoresCommands))
	require.Equal(t, []string{"SENDING_TO_GATEWAY", "SENT_TO_GATEWAY", "AWAITING_RESPONSE", "RETRYING", "NEEDS_REVIEW"},
		names(payoutstate.Status.InFlight))
	require.Equal(t, []string{"INITIALIZED"}, names(payoutstate.Status.Cancelable))
	require.Equal(t, []string{"NEEDS_REVIEW"}, names(payoutstate.Status.Reviewable))
	require.Equal(t, []string{"FAILED", "FINALIZED"}, names(payoutstate.Status.Unpaid))
	require.Equal(t, []string{"SUCCEEDED", "FINALIZED"}, names(payoutstate.Status.Closed))
}
