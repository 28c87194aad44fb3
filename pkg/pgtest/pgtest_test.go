package pgtest_test

import (
	"context"
	"testing"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// A test's writes on Tx are gone when it ends: the next test on the shared
// database does not see them, and a nested transaction is a savepoint.
func TestTxIsRolledBackWhenTheTestEnds(t *testing.T) {
	ctx := context.Background()
	const key = "pgtest-rollback-probe"
	count := func(t *testing.T) int {
		var n int
		if err := pgtest.Tx(t).QueryRow(ctx, `SELECT count(*) FROM processed_events WHERE event_id = $1`, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Run("writes", func(t *testing.T) {
		tx := pgtest.Tx(t)
		if _, err := tx.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g', $1)`, key); err != nil {
			t.Fatal(err)
		}
		nested, err := tx.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nested.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g2', $1)`, key); err != nil {
			t.Fatal(err)
		}
		if err := nested.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM processed_events WHERE event_id = $1`, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("inside the test: %d rows, want 1 (the savepoint's rolled back)", n)
		}
	})
	t.Run("sees nothing of it", func(t *testing.T) {
		if n := count(t); n != 0 {
			t.Fatalf("a later test sees %d rows of an earlier one", n)
		}
	})
}
