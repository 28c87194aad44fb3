package migrations

import (
	"context"
	"maps"
	"strings"
	"testing"
)

// 000039 disables every active Stripe destination that is not a connected
// account, with who, when and why, and nothing else; down re-enables
// exactly those, unless their value was registered again meanwhile.
func TestBareStripeDestinationsAreDisabled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := connect(t, migrated(t))
	// As the previous release registered them.
	rows := []struct{ id, user, provider, dest, kind, status string }{
		{"01930000-0000-7000-8000-000000000391", "alice", "stripe", "ba_1Alice", "bank_account", "active"},
		{"01930000-0000-7000-8000-000000000392", "alice", "stripe", "acct_1Alice", "connected_account", "active"},
		{"01930000-0000-7000-8000-000000000393", "bob", "paystack", "RCP_1Bob", "transfer_recipient", "active"},
		{"01930000-0000-7000-8000-000000000394", "carol", "stripe", "card_1Carol", "card", "disabled"},
		{"01930000-0000-7000-8000-000000000395", "dave", "stripe", "ba_1Dave", "bank_account", "active"},
	}
	for _, r := range rows {
		if _, err := db.Exec(ctx, `INSERT INTO destinations (id, user_id, provider, destination, type, status, created_by,
			disabled_at, disabled_by)
			VALUES ($1::uuid, $2, $3, $4, $5, $6, 'acme',
			        CASE WHEN $6 = 'disabled' THEN now() - interval '1 day' END, CASE WHEN $6 = 'disabled' THEN 'acme' END)`,
			r.id, r.user, r.provider, r.dest, r.kind, r.status); err != nil {
			t.Fatalf("insert %s: %v", r.dest, err)
		}
	}
	type state struct{ status, by, reason string }
	states := func() map[string]state {
		got := map[string]state{}
		rs, err := db.Query(ctx, `SELECT destination, status, coalesce(disabled_by, ''), coalesce(disabled_reason, '')
			FROM destinations`)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		for rs.Next() {
			var dest string
			var s state
			if err := rs.Scan(&dest, &s.status, &s.by, &s.reason); err != nil {
				t.Fatal(err)
			}
			got[dest] = s
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	run := func(file string) {
		t.Helper()
		sql, err := FS.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	before := states()

	run("000039_disable_bare_stripe_destinations.up.sql")
	after := states()
	for _, bare := range []string{"ba_1Alice", "ba_1Dave"} {
		s := after[bare]
		if s.status != "disabled" || s.by != "migration 000039" ||
			!strings.Contains(s.reason, "Stripe pays out to other people only through Connect") ||
			!strings.Contains(s.reason, "external_account") {
			t.Fatalf("%s after up: %+v, want disabled by migration 000039 with its reason", bare, s)
		}
	}
	for _, kept := range []string{"acct_1Alice", "RCP_1Bob", "card_1Carol"} {
		if after[kept] != before[kept] {
			t.Fatalf("%s changed: %+v, was %+v", kept, after[kept], before[kept])
		}
	}
	run("000039_disable_bare_stripe_destinations.up.sql")
	if again := states(); !maps.Equal(again, after) {
		t.Fatalf("a second up changed %v, want %v", again, after)
	}

	// Dave's value was registered again meanwhile (by a previous release
	// during the rollout): his disabled row stays disabled.
	if _, err := db.Exec(ctx, `INSERT INTO destinations (id, user_id, provider, destination, type, created_by)
		VALUES ('01930000-0000-7000-8000-000000000396', 'dave', 'stripe', 'ba_1Dave', 'bank_account', 'acme')`); err != nil {
		t.Fatal(err)
	}
	run("000039_disable_bare_stripe_destinations.down.sql")
	daves := map[string]int{}
	rs, err := db.Query(ctx, `SELECT status || ':' || coalesce(disabled_by, ''), count(*) FROM destinations
		WHERE user_id = 'dave' GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var k string
		var n int
		if err := rs.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		daves[k] = n
	}
	rs.Close()
	if want := map[string]int{"active:": 1, "disabled:migration 000039": 1}; !maps.Equal(daves, want) {
		t.Fatalf("dave's after down: %v, want %v", daves, want)
	}
	down := states()
	delete(down, "ba_1Dave")
	delete(before, "ba_1Dave")
	if !maps.Equal(down, before) {
		t.Fatalf("after down: %v, want as before %v", down, before)
	}
}
