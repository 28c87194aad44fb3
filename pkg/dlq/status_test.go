package dlq_test

import (
	"slices"
	"testing"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// The Go lists and the dead_letters CHECK constraints name the same values.
func TestStatusesAndSourcesMatchTheSchema(t *testing.T) {
	t.Parallel()
	tx := pgtest.Tx(t)
	var statuses []string
	for _, s := range dlq.Statuses() {
		statuses = append(statuses, string(s))
	}
	slices.Sort(statuses)
	if got := pgtest.CheckValues(t, tx, "dead_letters", "status"); !slices.Equal(got, statuses) {
		t.Errorf("dead_letters.status CHECK allows %q, dlq.Statuses() is %q", got, statuses)
	}
	sources := slices.Sorted(slices.Values(dlq.Sources()))
	if got := pgtest.CheckValues(t, tx, "dead_letters", "source"); !slices.Equal(got, sources) {
		t.Errorf("dead_letters.source CHECK allows %q, dlq.Sources() is %q", got, sources)
	}
	for _, s := range []string{"", "Open", "closed"} {
		if dlq.ValidStatus(s) {
			t.Errorf("ValidStatus(%q) = true", s)
		}
	}
}
