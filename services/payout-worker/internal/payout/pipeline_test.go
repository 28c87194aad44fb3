package payout

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
)

// The pipelined steps of a first payout each take one round trip (the
// processed check with the load; the create's "sending" row with the move
// to SENDING_TO_GATEWAY; the create's answer and the claim with the load
// that records it), and what they queue through database.Queue is read
// back whole: the loaded row, the new rows' ids, the answer and the claim.
func TestPipelinedStepsAreOneRoundTripEach(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	id := uuid.MustParse(fixture.Payout{ClientID: "c", IdempotencyKey: "k", UserID: "u1", Amount: 100,
		Transitions: []fixture.Transition{}}.Insert(t, db.Pool))
	cfg, err := pgx.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	trips := &pgtest.RoundTrips{}
	cfg.Tracer = trips
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	m := inbox.Message{Topic: "t", Group: "g", Headers: map[string]string{kafkax.HeaderMessageID: "cmd-1"}}
	// step runs fn in a transaction and returns the round trips fn took.
	step1 := func(fn func(tx pgx.Tx) error) int64 {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		before := trips.Count()
		if err := fn(tx); err != nil {
			t.Fatal(err)
		}
		n := trips.Count() - before
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return n
	}

	var p *Payout
	c := &sendingCreate{key: "key-1", at: time.Now().UTC().Truncate(time.Microsecond)}
	if n := step1(func(tx pgx.Tx) error {
		var done bool
		var err error
		p, done, err = loadUnprocessed(ctx, tx, m, id.String())
		if err == nil && done {
			t.Fatal("a new command was found processed")
		}
		return err
	}); n != 1 {
		t.Fatalf("load with the processed check: %d round trips, want 1", n)
	}
	if p.ID != id || p.Amount != 100 || p.Status != Initialized || p.Destination != "ba_1" {
		t.Fatalf("loaded %+v", p)
	}
	if n := step1(func(tx pgx.Tx) error { _, err := moveSending(ctx, tx, p, c, step{to: Sending}); return err }); n != 1 {
		t.Fatalf("move to sending with the create's record: %d round trips, want 1", n)
	}
	if c.row == 0 {
		t.Fatal("the create's payout_attempts id was not read back")
	}
	if n := step1(func(tx pgx.Tx) error {
		cur, rest, err := loadAnswered(ctx, tx, m, id, []pspRequest{{kind: "create", key: c.key, outcome: reqAccepted,
			ref: "po_1", at: c.at, row: c.row}})
		if err == nil && (len(rest) != 0 || cur.Status != Sending || cur.SendingAt == nil || !cur.SendingAt.Equal(c.at)) {
			t.Fatalf("after the answer: rest %v, payout %+v", rest, cur)
		}
		return err
	}); n != 1 {
		t.Fatalf("load with the answer and the claim: %d round trips, want 1", n)
	}
	var outcome string
	if err := db.Pool.QueryRow(ctx, `SELECT outcome FROM payout_attempts WHERE id = $1`, c.row).Scan(&outcome); err != nil {
		t.Fatal(err)
	}
	if outcome != reqAccepted {
		t.Fatalf("the create's answer is %q, want %q", outcome, reqAccepted)
	}
	if n := step1(func(tx pgx.Tx) error {
		_, done, err := loadUnprocessed(ctx, tx, m, id.String())
		if err == nil && !done {
			t.Fatal("the claim queued with the answer did not hold")
		}
		return err
	}); n != 1 {
		t.Fatalf("load of a processed command: %d round trips, want 1", n)
	}
}
