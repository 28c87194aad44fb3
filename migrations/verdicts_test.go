package migrations

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// 000032 moves payout-worker's verdicts out of payout_resolutions. An
// upgraded database keeps the verdicts the previous worker wrote (copied
// to resolution_verdicts); payout_resolutions_state shows a resolution's
// status from either place as operators saw it before, whichever
// release's worker decided it; down puts this release's verdicts back
// where the previous release reads them.
func TestResolutionVerdictsKeepEveryVerdict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := migrated(t)
	db := connect(t, dbURL)
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
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	payout := func() string {
		t.Helper()
		var id string
		if err := db.QueryRow(ctx, `
			INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, provider, status)
			VALUES (gen_random_uuid(), 'shop', gen_random_uuid()::text, 'h', 'alice', 1500, 'usd', 'acct_alice_1', 'stripe', 'NEEDS_REVIEW')
			RETURNING id::text`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	decidedAt := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// resolution stores a resolution as the previous release left it:
	// answer and decidedAt are nil unless decided.
	resolution := func(pid, status string, answer *string, at *time.Time) string {
		t.Helper()
		var id string
		if err := db.QueryRow(ctx, `
			INSERT INTO payout_resolutions (id, payout_id, user_id, outcome, reason, psp_object_id, requested_by, status, psp_answer, decided_at)
			VALUES (gen_random_uuid(), $1, 'alice', 'failed', 'checked', 'po_1', 'ops', $2, $3, $4) RETURNING id::text`,
			pid, status, answer, at).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	str := func(s string) *string { return &s }
	type state struct {
		status string
		answer *string
		at     *time.Time
	}
	stateOf := func(id string) state {
		t.Helper()
		var s state
		if err := db.QueryRow(ctx, `SELECT status, psp_answer, decided_at FROM payout_resolutions_state WHERE id = $1`, id).
			Scan(&s.status, &s.answer, &s.at); err != nil {
			t.Fatal(err)
		}
		return s
	}
	check := func(what, id string, want state) {
		t.Helper()
		got := stateOf(id)
		if got.status != want.status || deref(got.answer) != deref(want.answer) || (got.at == nil) != (want.at == nil) ||
			(got.at != nil && !got.at.Equal(*want.at)) {
			t.Errorf("%s: state %s %q %v, want %s %q %v", what, got.status, deref(got.answer), got.at, want.status, deref(want.answer), want.at)
		}
	}

	// The database as the previous release left it.
	run("000032_resolution_verdicts.down.sql")
	a, b := payout(), payout()
	applied := resolution(a, "applied", str("no object"), &decidedAt)
	refusedByOld := resolution(a, "refused", str("the PSP says paid"), &decidedAt)
	pending := resolution(a, "pending", nil, nil)
	rejected := resolution(b, "rejected", nil, &decidedAt)
	awaiting := resolution(b, "awaiting_approval", nil, nil)

	run("000032_resolution_verdicts.up.sql")
	rows, err := db.Query(ctx, `SELECT resolution_id::text, status, psp_answer, decided_at FROM resolution_verdicts`)
	if err != nil {
		t.Fatal(err)
	}
	type verdict struct {
		id, status, answer string
		at                 time.Time
	}
	verdicts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (verdict, error) {
		var v verdict
		return v, r.Scan(&v.id, &v.status, &v.answer, &v.at)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]verdict{
		applied:      {applied, "applied", "no object", decidedAt},
		refusedByOld: {refusedByOld, "refused", "the PSP says paid", decidedAt},
	}
	if len(verdicts) != len(want) {
		t.Errorf("backfilled verdicts %v, want %v", verdicts, want)
	}
	for _, v := range verdicts {
		if w, ok := want[v.id]; !ok || w.status != v.status || w.answer != v.answer || !w.at.Equal(v.at) {
			t.Errorf("backfilled verdict %+v, want %+v", v, w)
		}
	}
	check("applied before the upgrade", applied, state{"applied", str("no object"), &decidedAt})
	check("refused before the upgrade", refusedByOld, state{"refused", str("the PSP says paid"), &decidedAt})
	check("pending", pending, state{"pending", nil, nil})
	check("rejected", rejected, state{"rejected", nil, &decidedAt})
	check("awaiting approval", awaiting, state{"awaiting_approval", nil, nil})

	// This release's worker decides: payout_resolutions stays pending.
	later := decidedAt.Add(time.Hour)
	exec(`INSERT INTO resolution_verdicts (resolution_id, status, psp_answer, decided_at) VALUES ($1, 'refused', 'still pending at the PSP', $2)`,
		pending, later)
	check("refused by this release's worker", pending, state{"refused", str("still pending at the PSP"), &later})

	// The rollout: the previous worker decides a resolution (it writes
	// payout_resolutions only) ...
	c := payout()
	byOld := resolution(c, "pending", nil, nil)
	exec(`UPDATE payout_resolutions SET status = 'applied', psp_answer = 'no object', decided_at = $2 WHERE id = $1`, byOld, later)
	check("applied by the previous worker during the rollout", byOld, state{"applied", str("no object"), &later})
	// ... or decides one this release's worker refused, and applies it:
	// the applied verdict moved money and is shown ...
	d := payout()
	both := resolution(d, "pending", nil, nil)
	exec(`INSERT INTO resolution_verdicts (resolution_id, status, psp_answer, decided_at) VALUES ($1, 'refused', 'lookup failed', $2)`,
		both, decidedAt)
	exec(`UPDATE payout_resolutions SET status = 'applied', psp_answer = 'object po_1 is "failed"', decided_at = $2 WHERE id = $1`, both, later)
	check("refused by this worker, then applied by the previous one", both, state{"applied", str(`object po_1 is "failed"`), &later})
	// ... or refuses one this release's worker applied.
	e := payout()
	appliedByNew := resolution(e, "pending", nil, nil)
	exec(`INSERT INTO resolution_verdicts (resolution_id, status, psp_answer, decided_at) VALUES ($1, 'applied', 'no object', $2)`,
		appliedByNew, decidedAt)
	exec(`UPDATE payout_resolutions SET status = 'refused', psp_answer = 'not NEEDS_REVIEW', decided_at = $2 WHERE id = $1`,
		appliedByNew, later)
	check("applied by this worker, then refused by the previous one", appliedByNew, state{"applied", str("no object"), &decidedAt})

	// Down: this release's verdict goes back to payout_resolutions.
	run("000032_resolution_verdicts.down.sql")
	var status, answer string
	var at time.Time
	if err := db.QueryRow(ctx, `SELECT status, psp_answer, decided_at FROM payout_resolutions WHERE id = $1`, pending).
		Scan(&status, &answer, &at); err != nil {
		t.Fatal(err)
	}
	if status != "refused" || answer != "still pending at the PSP" || !at.Equal(later) {
		t.Errorf("after down: %s %q %v, want this release's verdict", status, answer, at)
	}
}

// payout-worker decides a resolution with the grants it keeps after the
// contract (deploy.md, "Pending contract"): none on payout_resolutions.
func TestPayoutWorkerDecidesWithoutPayoutResolutionsGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := migrated(t)
	owner := connect(t, dbURL)
	var rid string
	if err := owner.QueryRow(ctx, `
		WITH p AS (
		    INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, provider, status)
		    VALUES (gen_random_uuid(), 'shop', 'k', 'h', 'alice', 1500, 'usd', 'acct_alice_1', 'stripe', 'NEEDS_REVIEW') RETURNING id)
		INSERT INTO payout_resolutions (id, payout_id, user_id, outcome, reason, psp_object_id, requested_by, status)
		SELECT gen_random_uuid(), p.id, 'alice', 'failed', 'checked', 'po_1', 'ops', 'pending' FROM p RETURNING id::text`).Scan(&rid); err != nil {
		t.Fatal(err)
	}
	if err := ApplyContractNext(ctx, owner); err != nil {
		t.Fatal(err)
	}

	c := asRole(t, dbURL, RolePayoutWorker)
	refused(t, c, "reading payout_resolutions", `SELECT status FROM payout_resolutions`)
	var status string
	if err := c.QueryRow(ctx, `SELECT status FROM payout_resolutions_for_worker WHERE id = $1`, rid).Scan(&status); err != nil || status != "pending" {
		t.Fatalf("reading the resolution through its view: %q, %v", status, err)
	}
	decide := `INSERT INTO resolution_verdicts (resolution_id, status, psp_answer, decided_at) VALUES ($1, 'applied', 'no object', now())
		ON CONFLICT (resolution_id) DO NOTHING`
	for i, want := range []int64{1, 0} {
		tag, err := c.Exec(ctx, decide, rid)
		if err != nil || tag.RowsAffected() != want {
			t.Fatalf("verdict %d: %v rows, %v; want %d", i+1, tag.RowsAffected(), err, want)
		}
	}
	if err := c.QueryRow(ctx, `SELECT status FROM payout_resolutions_for_worker WHERE id = $1`, rid).Scan(&status); err != nil || status != "applied" {
		t.Fatalf("the decided resolution through its view: %q, %v", status, err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
