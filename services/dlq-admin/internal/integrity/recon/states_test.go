package recon_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// The ledger check writes two lists of payout states out in its SQL (for a
// partial index, queries.sql says why): they are payoutstate's meanings, so
// a state added to or reinterpreted in pkg/payoutstate fails here until the
// lists follow.
func TestStateListsAreTheMeaningsOfPayoutstate(t *testing.T) {
	b, err := os.ReadFile("queries.sql")
	require.NoError(t, err)
	lists := regexp.MustCompile(`p\.status IN \(([^)]*)\)`).FindAllStringSubmatch(string(b), -1)
	require.Len(t, lists, 2, "UnfinishedHolds' and AccountTotals' lists")
	var got [][]string
	for _, l := range lists {
		var states []string
		for _, s := range strings.Split(l[1], ",") {
			states = append(states, strings.Trim(strings.TrimSpace(s), "'"))
		}
		got = append(got, states)
	}
	notClosed := payoutstate.Names(func(s payoutstate.Status) bool { return !s.Closed() })
	holding := payoutstate.Names(func(s payoutstate.Status) bool { return s.InFlight() && !s.Reviewable() })
	require.Equal(t, notClosed, got[0], "UnfinishedHolds: every state but the closed ones")
	require.Equal(t, holding, got[1], "AccountTotals: the states holding money, review aside")
	require.Contains(t, string(b), "p.status = '"+string(payoutstate.NeedsReview)+"' AND NOT EXISTS",
		"AccountTotals: a payout in review holds money until its hold is released")
}
