package chaos

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// Connected payouts that fail after their transfer (the workload's
// faultConnectedPayoutFailed share: a connected account whose external
// account is one of the stand-in's ba_fail_*). The transfer is paid, so the
// money is in the connected account's balance; its payout to the bank
// account then fails. The worker must not give the money back: it parks
// the payout NEEDS_REVIEW with error class classConnectedPayoutFailed and
// one dead letter. The operator (reverseConnectedFailures) reverses the
// transfer at the PSP, whose transfer.reversed gives the money back to the
// wallet once (the payout ends FINALIZED). Invariants 20 and 21 hold the
// run to one transfer per payout and to no money back without a reversal.

// faultConnectedPayoutFailed names the share of the workload's Stripe
// payouts whose connected payout fails after the transfer was paid.
const faultConnectedPayoutFailed = "connected_payout_failed_after_transfer"

// classConnectedPayoutFailed is the payout worker's error class of a
// payout whose connected account's payout failed after its transfer.
const classConnectedPayoutFailed = "connected_payout_failed"

// parkedConnected is a payout in review whose transfer took its money to
// a connected account, with that transfer.
type parkedConnected struct{ PayoutID, Transfer string }

// reverseConnectedFailures is what an operator does for each payout in
// review whose money sits in a connected account: its transfer was made
// and the PSP holds no payout of it there that is paid or still pending
// (it failed, classConnectedPayoutFailed, or was refused). The operator
// reverses the whole transfer at the PSP (the stand-in's admin route, as
// the platform does at Stripe's Dashboard) and waits for its
// transfer.reversed to finish the payout. Replaying its dead letter
// instead would pay out again to the external account that just failed.
// A payout whose connected payout is paid or pending is left to the
// passes, which decide it from that payout (decideFromPSP).
func (su *suite) reverseConnectedFailures(ctx context.Context, op *OperatorReport) error {
	rows, err := su.pool.Query(ctx, `SELECT id::text, psp_transfer FROM payouts
		WHERE status = $1 AND psp_transfer IS NOT NULL AND external_account IS NOT NULL ORDER BY id`,
		payoutstate.NeedsReview)
	if err != nil {
		return fmt.Errorf("list payouts in review after a transfer: %w", err)
	}
	inReview, err := pgx.CollectRows(rows, pgx.RowToStructByPos[parkedConnected])
	if err != nil {
		return fmt.Errorf("list payouts in review after a transfer: %w", err)
	}
	waiting := map[string]bool{}
	for _, p := range inReview {
		var objs struct {
			Items []pspObject `json:"items"`
		}
		if err := getJSON(ctx, su.pspURL()+"/_psp/objects?payout_id="+url.QueryEscape(p.PayoutID), "", &objs); err != nil {
			return fmt.Errorf("the PSP's record of payout %s: %w", p.PayoutID, err)
		}
		if slices.ContainsFunc(objs.Items, func(o pspObject) bool { return o.Account != "" && o.Status != "failed" }) {
			continue
		}
		if err := post(su.pspURL()+"/_psp/objects/"+p.Transfer+"/reverse", `{"amount":0}`); err != nil {
			return fmt.Errorf("reverse transfer %s of payout %s: %w", p.Transfer, p.PayoutID, err)
		}
		op.Reversed++
		waiting[p.PayoutID] = true
	}
	if len(waiting) == 0 {
		return nil
	}
	started, reversed := time.Now(), len(waiting)
	err = waitFor(ctx, 2*time.Minute, func() (bool, error) {
		for id := range waiting {
			var status payoutstate.Status
			if err := su.pool.QueryRow(ctx, `SELECT status FROM payouts WHERE id::text = $1`, id).Scan(&status); err != nil {
				return false, nil // Postgres may be briefly unavailable; ask again
			}
			if status.Closed() {
				delete(waiting, id)
			}
		}
		return len(waiting) == 0, nil
	})
	su.cfg.log("operator: reversed the transfers of %d payouts whose connected payout failed or was refused; %d not finished after %s",
		reversed, len(waiting), time.Since(started).Round(time.Second))
	if err != nil {
		return fmt.Errorf("payouts whose transfer was reversed: %d not finished: %w", len(waiting), err)
	}
	return nil
}

// judgeTransfersOnce returns the violations of invariant 20 among the
// PSP's objects: a payout with more than one Stripe transfer.
func judgeTransfersOnce(objs []pspObject) (out []string, payouts int) {
	transfers := map[string][]pspObject{}
	for _, o := range objs {
		if o.Provider == "stripe" && o.Kind == "transfer" {
			transfers[o.PayoutID] = append(transfers[o.PayoutID], o)
		}
	}
	for _, id := range sortedKeys(transfers) {
		if t := transfers[id]; len(t) > 1 {
			out = append(out, fmt.Sprintf("payout %s has %d transfers at the PSP: %s", id, len(t), describe(t)))
		}
	}
	return out, len(transfers)
}

// checkTransfersOnce: 20. The PSP made at most one transfer per payout,
// failed or reversed ones included: once a transfer exists, only the
// connected account's payout is ever sent again.
func (su *suite) checkTransfersOnce(ctx context.Context, _ *workload, rep *Report) error {
	objs, err := fetchPSPObjects(ctx, su.pspURL())
	if err != nil {
		return fmt.Errorf("read the PSP's objects: %w", err)
	}
	bad, payouts := judgeTransfersOnce(objs)
	for _, v := range bad {
		rep.violation("%s", v)
	}
	if len(bad) == 0 {
		rep.passed("20. the PSP made at most one transfer per payout (%d payouts with a transfer)", payouts)
	}
	return nil
}

// checkConnectedFailures: 21. No payout whose connected payout failed got
// money back unless the PSP reversed its transfer. More generally, and so
// also for a connected payout refused, or a payout by a transfer alone: no
// payout with a transfer at the PSP got money back while that transfer
// was never reversed (the money is in the connected account). How much
// came back is invariant 19's. Those whose connected payout failed (the
// PSP's record holds a failed payout on the connected account for it, or
// the worker parked it classConnectedPayoutFailed) are counted apart.
func (su *suite) checkConnectedFailures(ctx context.Context, _ *workload, rep *Report) error {
	objs, err := fetchPSPObjects(ctx, su.pspURL())
	if err != nil {
		return fmt.Errorf("read the PSP's objects: %w", err)
	}
	failed := map[string]bool{}
	transferred := map[string]bool{}
	reversed := map[string]bool{}
	for _, o := range objs {
		switch {
		case o.Account != "" && o.Kind == "payout" && o.Status == "failed":
			failed[o.PayoutID] = true
		case o.Provider == "stripe" && o.Kind == "transfer":
			transferred[o.PayoutID] = true
			reversed[o.PayoutID] = reversed[o.PayoutID] || o.AmountReversed > 0
		}
	}
	rows, err := su.pool.Query(ctx, `SELECT DISTINCT payout_id::text FROM payout_transitions WHERE error_class = $1`,
		classConnectedPayoutFailed)
	if err != nil {
		return fmt.Errorf("payouts parked %s: %w", classConnectedPayoutFailed, err)
	}
	parked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("payouts parked %s: %w", classConnectedPayoutFailed, err)
	}
	for _, id := range parked {
		failed[id] = true
		transferred[id] = true // parked only once its transfer was made
	}
	rows, err = su.pool.Query(ctx, `SELECT p.id::text FROM payouts p WHERE p.id::text = ANY($1)
		AND EXISTS (SELECT 1 FROM ledger_transactions t WHERE t.kind IN ('payout_release', 'payout_return')
		            AND (t.reference = p.id::text OR t.reference LIKE p.id::text || ':%'))`, sortedKeys(transferred))
	if err != nil {
		return fmt.Errorf("payouts given back: %w", err)
	}
	givenBack, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("payouts given back: %w", err)
	}
	var bad []string
	failedBack := 0
	for _, id := range givenBack {
		switch {
		case !reversed[id]:
			bad = append(bad, id)
		case failed[id]:
			failedBack++
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		rep.violation("%d payouts whose transfer reached a connected account were given back though the transfer was never reversed: %s",
			len(bad), strings.Join(bad, ", "))
		return nil
	}
	rep.passed("21. %d payouts whose connected payout failed after the transfer, %d given back after a reversal of it; "+
		"none of the %d payouts with a transfer given back without one (%d given back)",
		len(failed), failedBack, len(transferred), len(givenBack))
	return nil
}
