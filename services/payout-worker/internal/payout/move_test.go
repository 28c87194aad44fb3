package payout

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// move records every allowed step (one payout_transitions row each, the
// payout row in its final state); when any step is refused it fails
// permanently and nothing of the move survives the transaction.
func TestMoveRecordsAllowedStepsAndRefusesTheRest(t *testing.T) {
	outer := pgtest.Tx(t)
	ctx := context.Background()
	id := uuid.MustParse(fixture.Payout{ClientID: "c", UserID: "u1", Amount: 100, Transitions: []fixture.Transition{}}.Insert(t, outer))
	// Each move runs in a transaction of its own: a savepoint of the test's.
	inTx := func(fn func(tx pgx.Tx) error) error {
		tx, err := outer.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if err := fn(tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	state := func() (Status, int) {
		var s Status
		var n int
		if err := outer.QueryRow(ctx, `SELECT p.status, (SELECT count(*) FROM payout_transitions WHERE payout_id = p.id)
			FROM payouts p WHERE p.id = $1`, id).Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		return s, n
	}

	// Sending then Finalized from Initialized: the second step is refused,
	// so neither is written.
	err := inTx(func(tx pgx.Tx) error {
		p, err := load(ctx, tx, id.String())
		if err != nil {
			return err
		}
		_, err = move(ctx, tx, p, step{to: Sending}, step{to: Finalized})
		return err
	})
	if err == nil || errclass.Of(err) != errclass.Permanent {
		t.Fatalf("move through a refused step: %v, want a permanent refusal", err)
	}
	if s, n := state(); s != Initialized || n != 0 {
		t.Fatalf("after a refused move: status %s, %d transitions; want INITIALIZED and none", s, n)
	}

	err = inTx(func(tx pgx.Tx) error {
		p, err := load(ctx, tx, id.String())
		if err != nil {
			return err
		}
		_, err = move(ctx, tx, p, step{to: Sending}, step{to: Sent}, step{to: Awaiting})
		return err
	})
	if err != nil {
		t.Fatalf("allowed move: %v", err)
	}
	if s, n := state(); s != Awaiting || n != 3 {
		t.Fatalf("after an allowed move: status %s, %d transitions; want AWAITING_RESPONSE and 3", s, n)
	}
}
