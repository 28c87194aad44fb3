package chaos

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// ledgerTx posts one balanced transaction moving amount from one wallet to
// another.
func ledgerTx(t *testing.T, pool *pgxpool.Pool, kind, ref string, from, to int64, amount int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	var id string
	if err := tx.QueryRow(ctx, `INSERT INTO ledger_transactions (kind, reference) VALUES ($1, $2) RETURNING id::text`,
		kind, ref).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ledger_entries (transaction_id, wallet_id, amount, currency)
		VALUES ($1, $2, $4, 'usd'), ($1, $3, -$4::bigint, 'usd')`, id, to, from, amount); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Invariant 3 must fail for a payout left in NEEDS_REVIEW (what a run
// without the operator leaves) and for a finished payout whose hold was
// never settled, and pass once both are final with their holds at zero.
func TestCheckPayoutsFailsForAPayoutLeftInReviewOrAHoldLeftBehind(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	su := &suite{pool: db.Pool}
	wallet := func(kind, owner string) int64 {
		var id int64
		if err := db.Pool.QueryRow(ctx, `INSERT INTO wallets (kind, owner, currency) VALUES ($1, $2, 'usd') RETURNING id`,
			kind, owner).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// A user balance is not derived from entries here; invariant 3 looks
	// at the holds account only.
	user, holds, clearing := wallet("user", "chaos-review"), wallet("system", "payout_holds"), wallet("system", "psp_clearing:stripe")
	payout := func(status string) string {
		id := uuid.NewString()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency,
			destination, provider, status) VALUES ($1::uuid, 'chaos', $1::text, 'h', 'chaos-review', 500, 'usd', 'acct_x', 'stripe', $2)`, id, status); err != nil {
			t.Fatal(err)
		}
		ledgerTx(t, db.Pool, "payout_hold", id, user, holds, 500)
		return id
	}
	inReview, unsettled, released := payout("NEEDS_REVIEW"), payout("SUCCEEDED"), payout("FINALIZED")
	ledgerTx(t, db.Pool, "payout_release", released, holds, user, 500)

	rep := &Report{}
	if err := su.checkPayouts(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 2 || !strings.Contains(got, "1 payouts left in NEEDS_REVIEW, not final") ||
		!strings.Contains(got, inReview) || !strings.Contains(got, "1 finished payouts leave a balance on the holds account") {
		t.Fatalf("violations:\n%s\nwant NEEDS_REVIEW %s named and one hold left behind", got, inReview)
	}

	// What the operator and the worker do: the review payout resolved
	// failed (hold released), the paid one's hold settled.
	if _, err := db.Pool.Exec(ctx, `UPDATE payouts SET status = 'FINALIZED' WHERE id = $1`, inReview); err != nil {
		t.Fatal(err)
	}
	ledgerTx(t, db.Pool, "payout_release", inReview, holds, user, 500)
	ledgerTx(t, db.Pool, "payout_settle", unsettled, holds, clearing, 500)
	rep = &Report{}
	if err := su.checkPayouts(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 0 || len(rep.Checks) != 1 || !strings.Contains(rep.Checks[0], "FINALIZED 2, SUCCEEDED 1") {
		t.Fatalf("violations %v, checks %v; want invariant 3 to pass with FINALIZED 2, SUCCEEDED 1", rep.Violations, rep.Checks)
	}
}
