package migrations

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

const (
	createPayout = `SELECT id FROM create_payout($1::uuid, 'acme', $2, 'hash', 'alice', 1500, 'usd', 'acct_123', 'stripe', 'corr', NULL)`
	cancelPayout = `SELECT canceled, status, error_class, last_error FROM cancel_payout($1::uuid, 'acme')`
)

// Once the contract step revokes webhook-api's writes of payouts and
// payout_transitions (ContractNextWrites), its role cannot write them
// directly, and still creates and cancels payouts through payout-worker's
// functions. No other service role may call them.
func TestWritesThroughFunctionsAfterTheContract(t *testing.T) {
	t.Parallel()
	dbURL := migrated(t)
	ctx := context.Background()
	owner := connect(t, dbURL)
	// This test's database only: table grants are per database.
	if err := ApplyContractNext(ctx, owner); err != nil {
		t.Fatal(err)
	}

	c := asRole(t, dbURL, RoleWebhookAPI)
	const id = "01930000-0000-7000-8000-0000000000a1"
	refused(t, c, "inserting a payout", `INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount,
		currency, destination, provider) VALUES ($1::uuid, 'acme', 'k0', 'h', 'alice', 1, 'usd', 'ba', 'stripe')`, id)
	refused(t, c, "updating a payout", `UPDATE payouts SET status = 'FINALIZED'`)
	refused(t, c, "inserting a transition", `INSERT INTO payout_transitions (payout_id, to_status) VALUES ($1::uuid, 'FINALIZED')`, id)
	refused(t, c, "reading payouts", `SELECT status FROM payouts`)
	refused(t, c, "reading transitions", `SELECT to_status FROM payout_transitions`)
	undefined(t, c, "reading a payout's PSP key through its view", `SELECT psp_key FROM payouts_for_api`)
	undefined(t, c, "reading a transition's detail through its view", `SELECT detail FROM payout_transitions_for_api`)

	var got string
	if err := c.QueryRow(ctx, createPayout, id, "k1").Scan(&got); err != nil || got != id {
		t.Fatalf("create_payout as %s: %q, %v", RoleWebhookAPI, got, err)
	}
	rows, err := c.Query(ctx, createPayout, "01930000-0000-7000-8000-0000000000a2", "k1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(again) != 0 {
		t.Fatalf("create_payout with a used key must return no row: %v, %v", again, err)
	}
	var (
		canceled               bool
		status, class, lastErr string
	)
	if err := c.QueryRow(ctx, cancelPayout, id).Scan(&canceled, &status, &class, &lastErr); err != nil {
		t.Fatalf("cancel_payout as %s: %v", RoleWebhookAPI, err)
	}
	if !canceled || status != "FINALIZED" || class != "canceled" || lastErr != "canceled by client acme" {
		t.Fatalf("cancel_payout: canceled %v, %s, %s, %q", canceled, status, class, lastErr)
	}
	var steps string
	if err := c.QueryRow(ctx, `SELECT string_agg(coalesce(from_status, '') || '>' || to_status, ' ' ORDER BY id)
		FROM payout_transitions_for_api WHERE payout_id = $1::uuid`, id).Scan(&steps); err != nil {
		t.Fatalf("reading the transitions through their view: %v", err)
	}
	if steps != ">INITIALIZED INITIALIZED>FAILED FAILED>FINALIZED" {
		t.Fatalf("transitions through the view: %s", steps)
	}
	if err := owner.QueryRow(ctx, `SELECT string_agg(coalesce(from_status, '') || '>' || to_status, ' ' ORDER BY id)
		FROM payout_transitions WHERE payout_id = $1::uuid`, id).Scan(&steps); err != nil {
		t.Fatal(err)
	}
	if steps != ">INITIALIZED INITIALIZED>FAILED FAILED>FINALIZED" {
		t.Fatalf("transitions: %s", steps)
	}

	for _, role := range []string{RoleOutboxRelay, RolePayoutWorker, RoleDLQAdmin} {
		r := asRole(t, dbURL, role)
		refused(t, r, role+" creating a payout", createPayout, "01930000-0000-7000-8000-0000000000a3", "k2")
		refused(t, r, role+" canceling a payout", cancelPayout, id)
	}
}

// create_payout copies the external account of the payout's destination
// (a Stripe connected account's bank account) onto the payout, so the
// worker pays out to what the payout was accepted for.
func TestCreatePayoutKeepsItsDestinationsExternalAccount(t *testing.T) {
	t.Parallel()
	dbURL := migrated(t)
	ctx := context.Background()
	owner := connect(t, dbURL)
	const dest, id = "01930000-0000-7000-8000-0000000000d1", "01930000-0000-7000-8000-0000000000d2"
	if _, err := owner.Exec(ctx, `INSERT INTO destinations (id, user_id, provider, destination, type, created_by,
		external_account) VALUES ($1::uuid, 'alice', 'stripe', 'acct_1', 'connected_account', 'acme', 'ba_9')`, dest); err != nil {
		t.Fatal(err)
	}
	c := asRole(t, dbURL, RoleWebhookAPI)
	if _, err := c.Exec(ctx, `SELECT id FROM create_payout($1::uuid, 'acme', 'k-ext', 'hash', 'alice', 1500, 'usd',
		'acct_1', 'stripe', 'corr', $2::uuid)`, id, dest); err != nil {
		t.Fatal(err)
	}
	var ext string
	if err := c.QueryRow(ctx, `SELECT coalesce(external_account, '') FROM payouts_for_api WHERE id = $1::uuid`, id).Scan(&ext); err != nil {
		t.Fatal(err)
	}
	if ext != "ba_9" {
		t.Fatalf("payout's external account %q, want its destination's ba_9", ext)
	}
}
