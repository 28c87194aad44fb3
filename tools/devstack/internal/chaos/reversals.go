package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// reverseTransfers is faultPSPReversals: the PSP (or the platform at its
// Dashboard) takes money back from up to three paid Connect transfers
// whose payouts are SUCCEEDED here, among the workload's payouts by a
// transfer alone (acct_chaos_t<n>, no external account): a part of each,
// and of some the rest a moment later. Each reversal sends
// transfer.reversed with the transfer's amount_reversed so far.
// errNoTarget while no such transfer exists yet.
func (in *injector) reverseTransfers(ctx context.Context) error {
	rows, err := in.pool.Query(ctx, `SELECT id::text FROM payouts
		WHERE status = 'SUCCEEDED' AND provider = 'stripe' AND destination LIKE 'acct\_chaos\_t%'
		  AND external_account IS NULL ORDER BY id`)
	if err != nil {
		return err
	}
	succeeded := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		succeeded[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	objs, err := fetchPSPObjects(ctx, in.psp)
	if err != nil {
		return err
	}
	var targets []pspObject
	for _, o := range objs {
		if o.Kind == "transfer" && paid(o) && o.AmountReversed == 0 && o.Amount >= 2 && succeeded[o.PayoutID] {
			targets = append(targets, o)
		}
	}
	if len(targets) == 0 {
		return errNoTarget
	}
	in.rng.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	for _, o := range targets[:min(3, len(targets))] {
		part := 1 + in.rng.Int64N(o.Amount-1)
		if err := post(in.psp+"/_psp/objects/"+o.ID+"/reverse", `{"amount":`+strconv.FormatInt(part, 10)+`}`); err != nil {
			return fmt.Errorf("reverse %d of transfer %s: %w", part, o.ID, err)
		}
		in.log("reversal: %d of transfer %s (payout %s, %d)", part, o.ID, o.PayoutID, o.Amount)
		if in.rng.Float64() < 0.5 {
			sleep(ctx, time.Duration(100+in.rng.IntN(400))*time.Millisecond)
			if err := post(in.psp+"/_psp/objects/"+o.ID+"/reverse", `{"amount":0}`); err != nil {
				return fmt.Errorf("reverse the rest of transfer %s: %w", o.ID, err)
			}
			in.log("reversal: the rest of transfer %s", o.ID)
		}
	}
	return nil
}

// checkReversals: 19. every payout whose transfer the PSP took money back
// from has exactly that back in its wallet (the parts' returns, or the hold
// released when the whole came back before the payout was settled), and a
// transfer reversed whole finished its payout (FINALIZED).
func (su *suite) checkReversals(ctx context.Context, _ *workload, rep *Report) error {
	objs, err := su.pspObjects(ctx)
	if err != nil {
		return err
	}
	reversed := map[string]int64{}
	whole := map[string]bool{}
	for _, o := range objs {
		if o.Kind == "transfer" && o.AmountReversed > 0 {
			reversed[o.PayoutID] += o.AmountReversed
			whole[o.PayoutID] = whole[o.PayoutID] || o.AmountReversed == o.Amount
		}
	}
	var bad []string
	for _, id := range sortedKeys(reversed) {
		var back int64
		var status string
		err := su.pool.QueryRow(ctx, `SELECT
			(SELECT coalesce(sum(e.amount), 0) FROM ledger_transactions t JOIN ledger_entries e ON e.transaction_id = t.id
			   JOIN wallets w ON w.id = e.wallet_id
			  WHERE t.kind IN ('payout_return', 'payout_release') AND w.kind = 'user'
			    AND (t.reference = p.id::text OR t.reference LIKE p.id::text || ':%')),
			p.status FROM payouts p WHERE p.id::text = $1`, id).Scan(&back, &status)
		if err != nil {
			return fmt.Errorf("payout %s: %w", id, err)
		}
		switch {
		case back != reversed[id]:
			bad = append(bad, fmt.Sprintf("payout %s: the PSP took back %d, the wallet got %d (%s)", id, reversed[id], back, status))
		case whole[id] && status != string(payoutstate.Finalized):
			bad = append(bad, fmt.Sprintf("payout %s: its transfer was reversed whole, the payout is %s", id, status))
		}
	}
	if len(bad) > 0 {
		rep.violation("reversed transfers: %s", strings.Join(bad, "; "))
		return nil
	}
	rep.passed("19. every transfer the PSP took money back from (%d) gave exactly that back to its wallet, each part once", len(reversed))
	return nil
}
