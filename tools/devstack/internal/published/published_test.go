package published_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
)

// The relay deletes what it publishes; the invariants read the copy. A
// delete by the relay's own role is kept, with its id and headers, and a
// row still unpublished or dead-lettered is not in it.
func TestKeepPublishedKeepsWhatTheRelayDeletes(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	if err := published.Keep(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	var sent, waiting, lettered int64
	for _, id := range []*int64{&sent, &waiting, &lettered} {
		if err := db.Pool.QueryRow(ctx, `INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers)
			VALUES ('aegis.webhook.pending', 'e', 'u1', '{}', '{"message_id":"m1"}') RETURNING id`).Scan(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE transaction_outbox SET status = 'dlq', finished_at = now() WHERE id = $1`, lettered); err != nil {
		t.Fatal(err)
	}
	if err := database.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE aegis_outbox_relay`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM transaction_outbox WHERE id = $1`, sent)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT id FROM `+published.Rows+` o WHERE headers->>'message_id' = 'm1'`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != sent {
		t.Fatalf("published rows %v, want only the deleted row %d", got, sent)
	}
}
