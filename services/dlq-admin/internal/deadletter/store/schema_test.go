package store_test

import (
	"slices"
	"testing"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
)

// Statuses and the dead_letters.status CHECK constraint name the same states.
func TestStatusesMatchTheSchema(t *testing.T) {
	db := pgtest.New(t)
	want := slices.Clone(store.Statuses())
	slices.Sort(want)
	if got := db.CheckValues(t, "dead_letters", "status"); !slices.Equal(got, want) {
		t.Errorf("dead_letters.status CHECK allows %q, store.Statuses() is %q", got, want)
	}
}
