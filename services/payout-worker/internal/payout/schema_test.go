package payout

import (
	"slices"
	"testing"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// statuses() and the payouts.status CHECK constraint name the same states:
// the transition matrix test walks statuses(), so a state only the schema
// knows would have no tested transitions.
func TestStatusesMatchTheSchema(t *testing.T) {
	tx := pgtest.Tx(t)
	var want []string
	for _, s := range statuses() {
		want = append(want, string(s))
	}
	slices.Sort(want)
	if got := pgtest.CheckValues(t, tx, "payouts", "status"); !slices.Equal(got, want) {
		t.Errorf("payouts.status CHECK allows %q, statuses() is %q", got, want)
	}
}
