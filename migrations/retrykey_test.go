package migrations

import (
	"context"
	"maps"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Retries written on their user's key before the upgrade, still waiting,
// move to their payout's key (with the user in user_key), so they stop
// holding back the user's rows at once; nothing else moves. Down puts them
// back on the user's key.
func TestWaitingPayoutRetriesMoveToTheirPayoutsKey(t *testing.T) {
	ctx := context.Background()
	dbURL := newDatabase(t)
	if _, err := Up(dbURL); err != nil {
		t.Fatalf("Up: %v", err)
	}
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	// As the previous release wrote them: a waiting retry, a failed one (the
	// relay's own retry pending), one a relay is publishing, one published,
	// the user's payout request and credit.
	rows := []struct{ name, topic, key, msgID, status, payoutID string }{
		{"waiting", "aegis.transactions", "u1", "payout:p1:retry:7", "pending", "p1"},
		{"failed", "aegis.transactions", "u1", "payout:p2:retry:9", "failed", "p2"},
		{"processing", "aegis.transactions", "u1", "payout:p3:retry:4", "processing", "p3"},
		{"processed", "aegis.transactions", "u1", "payout:p4:retry:2", "processed", "p4"},
		{"request", "aegis.transactions", "u1", "payout:p5:request", "pending", "p5"},
		{"credit", "aegis.webhook.pending", "u1", "stripe:evt_1", "pending", ""},
	}
	for _, r := range rows {
		if _, err := db.Exec(ctx, `
			INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers, status, next_retry_at, finished_at)
			VALUES ($1, CASE WHEN $1 = 'aegis.transactions' THEN 'payout.requested' ELSE 'payment_intent.succeeded' END, $2,
			        jsonb_build_object('payout_id', $5::text, 'user_id', $2::text), jsonb_build_object('message_id', $3::text), $4,
			        now() + interval '10 minutes', CASE WHEN $4 = 'processed' THEN now() END)`,
			r.topic, r.key, r.msgID, r.status, r.payoutID); err != nil {
			t.Fatalf("insert %s: %v", r.name, err)
		}
	}
	keys := func() map[string][2]string {
		got := map[string][2]string{}
		rs, err := db.Query(ctx, `SELECT headers->>'message_id', partition_key, coalesce(headers->>'user_key', '') FROM transaction_outbox`)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		for rs.Next() {
			var id, key, user string
			if err := rs.Scan(&id, &key, &user); err != nil {
				t.Fatal(err)
			}
			got[id] = [2]string{key, user}
		}
		return got
	}
	run := func(file string) {
		sql, err := FS.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}

	run("000026_outbox_payout_retry_key.up.sql")
	want := map[string][2]string{
		"payout:p1:retry:7": {"payout-retry:p1", "u1"},
		"payout:p2:retry:9": {"payout-retry:p2", "u1"},
		"payout:p3:retry:4": {"u1", ""},
		"payout:p4:retry:2": {"u1", ""},
		"payout:p5:request": {"u1", ""},
		"stripe:evt_1":      {"u1", ""},
	}
	if got := keys(); !maps.Equal(got, want) {
		t.Fatalf("after up: %v, want %v", got, want)
	}
	run("000026_outbox_payout_retry_key.up.sql")
	if got := keys(); !maps.Equal(got, want) {
		t.Fatalf("a second up changed %v, want %v", got, want)
	}

	run("000026_outbox_payout_retry_key.down.sql")
	for id, kv := range want {
		if kv[0] != "u1" {
			want[id] = [2]string{"u1", kv[1]}
		}
	}
	if got := keys(); !maps.Equal(got, want) {
		t.Fatalf("after down: %v, want %v", got, want)
	}
}
