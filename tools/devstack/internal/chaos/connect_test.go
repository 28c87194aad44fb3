package chaos

import (
	"context"
	"strings"
	"testing"
)

// Invariant 20 names a payout with two transfers, failed ones included,
// and passes for one transfer per payout whatever follows it on the
// connected account.
func TestCheckTransfersOnceNamesAPayoutWithTwoTransfers(t *testing.T) {
	objs := []pspObject{
		{Provider: "stripe", Kind: "transfer", ID: "tr_1", PayoutID: "once", Amount: 500, Status: "paid"},
		{Provider: "stripe", Kind: "payout", ID: "po_1", PayoutID: "once", Amount: 500, Status: "failed", Account: "acct_1"},
		{Provider: "stripe", Kind: "payout", ID: "po_2", PayoutID: "once", Amount: 500, Status: "paid", Account: "acct_1"},
		{Provider: "stripe", Kind: "transfer", ID: "tr_2", PayoutID: "twice", Amount: 500, Status: "failed"},
		{Provider: "stripe", Kind: "transfer", ID: "tr_3", PayoutID: "twice", Amount: 500, Status: "paid"},
		{Provider: "paystack", Kind: "transfer", ID: "TRF_1", PayoutID: "ps", Amount: 500, Status: "success"},
	}
	su := &suite{ports: stackPorts(pspServer(t, objs))}
	rep := &Report{}
	if err := su.checkTransfersOnce(context.Background(), &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 1 || !strings.Contains(got, "payout twice has 2 transfers") ||
		!strings.Contains(got, "tr_2") || !strings.Contains(got, "tr_3") {
		t.Fatalf("violations:\n%s\nwant payout twice named with both transfers, and nothing else", got)
	}

	su = &suite{ports: stackPorts(pspServer(t, objs[:3]))}
	rep = &Report{}
	if err := su.checkTransfersOnce(context.Background(), &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 0 || len(rep.Checks) != 1 || !strings.Contains(rep.Checks[0], "(1 payouts with a transfer)") {
		t.Fatalf("violations %v, checks %v; want invariant 20 to pass for 1 payout", rep.Violations, rep.Checks)
	}
}

// Invariant 21 fails for a payout whose connected payout failed and whose
// money came back without a reversal of its transfer, whether the PSP's
// record or the worker's parking says it failed, and for a payout by a
// transfer alone given back unreversed; a payout given back after its
// transfer was reversed, one still held and one whose transfer was never
// made pass.
func TestCheckConnectedFailuresWantsAReversalBeforeMoneyBack(t *testing.T) {
	ctx := context.Background()
	db := newWeekDB(t)
	reversed, unreversed, parked, held := db.payout("FINALIZED"), db.payout("FINALIZED"), db.payout("FINALIZED"), db.payout("NEEDS_REVIEW")
	transferOnly, refused := db.payout("FINALIZED"), db.payout("FINALIZED")
	for _, id := range []string{reversed, unreversed, parked, transferOnly, refused} {
		db.release(id)
	}
	for _, id := range []string{parked, held} {
		if _, err := db.pool.Exec(ctx, `INSERT INTO payout_transitions (payout_id, from_status, to_status, error, error_class)
			VALUES ($1::uuid, 'AWAITING_RESPONSE', 'NEEDS_REVIEW', 'connected payout failed', $2)`, id, classConnectedPayoutFailed); err != nil {
			t.Fatal(err)
		}
	}
	transfer := func(payout string, amountReversed int64) pspObject {
		return pspObject{Provider: "stripe", Kind: "transfer", ID: "tr_" + payout, PayoutID: payout, Amount: 500, Status: "paid",
			AmountReversed: amountReversed}
	}
	connectedFailed := func(payout string) pspObject {
		return pspObject{Provider: "stripe", Kind: "payout", ID: "po_" + payout, PayoutID: payout, Amount: 500, Status: "failed",
			Account: "acct_1", FailureCode: "account_closed"}
	}
	objs := []pspObject{
		transfer(reversed, 500), connectedFailed(reversed),
		transfer(unreversed, 0), connectedFailed(unreversed),
		transfer(parked, 0),
		transfer(held, 0), connectedFailed(held),
		transfer(transferOnly, 0),
	}
	su := &suite{pool: db.pool, ports: stackPorts(pspServer(t, objs))}
	rep := &Report{}
	if err := su.checkConnectedFailures(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 1 || !strings.Contains(got, "3 payouts whose transfer reached a connected account were given back") ||
		!strings.Contains(got, unreversed) || !strings.Contains(got, parked) || !strings.Contains(got, transferOnly) ||
		strings.Contains(got, reversed) || strings.Contains(got, held) || strings.Contains(got, refused) {
		t.Fatalf("violations:\n%s\nwant %s, %s and %s named, and nothing else", got, unreversed, parked, transferOnly)
	}

	objs[2], objs[4], objs[7] = transfer(unreversed, 500), transfer(parked, 500), transfer(transferOnly, 200)
	su = &suite{pool: db.pool, ports: stackPorts(pspServer(t, objs))}
	rep = &Report{}
	if err := su.checkConnectedFailures(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 0 || len(rep.Checks) != 1 ||
		!strings.Contains(rep.Checks[0], "21. 4 payouts whose connected payout failed after the transfer, 3 given back after a reversal") ||
		!strings.Contains(rep.Checks[0], "none of the 5 payouts with a transfer given back without one (4 given back)") {
		t.Fatalf("violations %v, checks %v; want invariant 21 to pass: 4 failed, 3 of them given back, 5 with a transfer, 4 given back",
			rep.Violations, rep.Checks)
	}
}
