package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// The evidence part of the run: PSP outcome events signed with
// the real secrets but not matching their payout (a wrong amount), which
// must change nothing and be dead-lettered as outcome_mismatch; and payouts
// whose first PSP answer is lost (connected accounts whose external account
// is one of the PSP stand-in's ba_lost_*: the transfer is made, then the
// first create of the account's payout executes and its answer is lost),
// which must be looked up and adopted, and never given back while the PSP
// paid. A payout the PSP refused there (ba_lost_invalid_*) leaves the money
// in the connected account: it waits in review for the operator to reverse
// its transfer (operator.go), like every failed connected payout.

// evidenceLog records what the evidence operations sent.
type evidenceLog struct {
	mu     sync.Mutex
	forged []forgedOutcome
}

// forgedOutcome is one signed outcome event with a wrong amount.
type forgedOutcome struct {
	Provider, EventID, PayoutID string
	Status                      int
}

// evidenceOp draws, from the workload's seeded source, whether the next
// operation is an evidence one and returns it (nil otherwise). Called with
// w.mu held.
func (w *workload) evidenceOp(n int, user string) func() {
	r := w.rng.Float64()
	switch {
	case r < 0.02:
		return func() { w.forgedOutcome(n) }
	case r < 0.04:
		external := fmt.Sprintf("ba_lost_ok_%d", n)
		if w.rng.Float64() < 0.5 {
			external = fmt.Sprintf("ba_lost_invalid_%d", n)
		}
		body := fmt.Sprintf(`{"user_id":%q,"amount":%d,"currency":"usd","destination":"acct_chaos_lost_%d","provider":"stripe"}`,
			user, 100+w.rng.IntN(900), n)
		key := fmt.Sprintf("chaos-key-%d", n)
		w.payouts = append(w.payouts, &payoutReq{Key: key, Body: body, External: external, Expect: "new"})
		return func() { w.payout(key, body, external, "new") }
	}
	return nil
}

// forgedOutcome sends, signed, a payout outcome event naming a real payout
// with the wrong amount: payout.failed for a payout that is not finished as
// failed (applied, it would give the money back while the PSP pays),
// payout.paid otherwise. Every other one is dated two minutes ahead (inside
// the future tolerance): refused, it must not make the PSP's real event
// about the same object, dated earlier, look stale (invariant 3 then sees
// the payout finish); the rest are dated before the payout was created.
func (w *workload) forgedOutcome(n int) {
	w.mu.Lock()
	var candidates []*payoutReq
	for _, p := range w.payouts {
		if p.Expect == "new" && p.PayoutID != "" {
			candidates = append(candidates, p)
		}
	}
	var pick *payoutReq
	if len(candidates) > 0 {
		pick = candidates[w.rng.IntN(len(candidates))]
	}
	w.mu.Unlock()
	if pick == nil {
		return
	}
	status, p := w.getJSON("/v1/payouts/" + pick.PayoutID)
	if status != http.StatusOK {
		return
	}
	amount, _ := p["amount"].(float64)
	provider, _ := p["provider"].(string)
	st, _ := p["status"].(string)
	ref, _ := p["psp_reference"].(string)
	created, err := time.Parse(time.RFC3339Nano, fmt.Sprint(p["created_at"]))
	if err != nil {
		return
	}
	at := created.Add(-time.Minute)
	if n%2 == 0 {
		at = time.Now().Add(2 * time.Minute)
	}
	wrong := int64(amount) + 1 + int64(n%97)
	f := forgedOutcome{Provider: provider, PayoutID: pick.PayoutID}
	switch provider {
	case "stripe":
		typ := "payout.failed"
		if payoutstate.Status(st) == payoutstate.Finalized {
			typ = "payout.paid"
		}
		if !strings.HasPrefix(ref, "po_") {
			ref = fmt.Sprintf("po_chaos_forged_%d", n)
		}
		f.EventID = fmt.Sprintf("evt_chaos_forged_%d", n)
		obj := fmt.Sprintf(`{"id":%q,"object":"payout","amount":%d,"currency":"usd","status":%q,"metadata":{"payout_id":%q}}`,
			ref, wrong, typ[len("payout."):], pick.PayoutID)
		f.Status = w.sendStripe(w.stripeEvent(f.EventID, typ, at.Unix(), obj))
	case "paystack":
		typ := "transfer.failed"
		if payoutstate.Status(st) == payoutstate.Finalized {
			typ = "transfer.success"
		}
		// An object id of its own: the forged event is a separate event,
		// never a duplicate of (or newer than) the PSP's real one.
		id := 8_000_000 + n
		f.EventID = fmt.Sprintf("%s:%d", typ, id)
		body := []byte(fmt.Sprintf(`{"event":%q,"data":{"id":%d,"reference":%q,"transfer_code":%q,"amount":%d,"currency":"NGN","status":%q,"updatedAt":%q}}`,
			typ, id, pick.PayoutID, ref, wrong, typ[len("transfer."):], at.UTC().Format(time.RFC3339)))
		f.Status = w.sendPaystack(body)
	default:
		return
	}
	w.evidence.mu.Lock()
	w.evidence.forged = append(w.evidence.forged, f)
	w.evidence.mu.Unlock()
	w.record(&webhook{Provider: provider, EventID: f.EventID, Kind: "forged", Status: f.Status})
}

// checkEvidence: 8. Every forged outcome event that was acknowledged was
// refused as evidence (recorded outcome_mismatch on its payout, never
// applied) and sits in a dead letter of class outcome_mismatch. Every payout
// whose first PSP answer was lost ended adopted (SUCCEEDED), failed after
// the PSP confirmed it had nothing (FINALIZED), or NEEDS_REVIEW, and none was
// given back while the PSP holds a live payout for it. Every applied
// outcome event matched its payout's amount and currency.
func (su *suite) checkEvidence(ctx context.Context, wl *workload, rep *Report) error {
	ev := &wl.evidence
	ev.mu.Lock()
	defer ev.mu.Unlock()
	bad, refused := 0, 0
	for _, f := range ev.forged {
		if f.Status/100 != 2 {
			continue
		}
		var mismatched, applied, letters int
		err := su.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM payout_evidence WHERE provider = $1 AND event_id = $2 AND verdict = 'outcome_mismatch'),
			(SELECT count(*) FROM payout_evidence WHERE provider = $1 AND event_id = $2 AND verdict <> 'outcome_mismatch'),
			(SELECT count(*) FROM dead_letters WHERE error_class = 'outcome_mismatch'
			  AND position(convert_to($2, 'UTF8') in payload) > 0)`, f.Provider, f.EventID).Scan(&mismatched, &applied, &letters)
		if err != nil {
			return err
		}
		if mismatched == 0 || applied > 0 || letters == 0 {
			rep.violation("forged %s event %s for payout %s: %d outcome_mismatch verdicts, %d other verdicts, %d dead letters",
				f.Provider, f.EventID, f.PayoutID, mismatched, applied, letters)
			bad++
			continue
		}
		refused++
	}

	objs, err := su.pspObjects(ctx)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, o := range objs {
		if o.Status != "failed" {
			live[o.PayoutID] = true
		}
	}
	rows, err := su.pool.Query(ctx, `
		SELECT p.id::text, p.destination, p.status,
		       EXISTS (SELECT 1 FROM ledger_transactions t WHERE t.kind = 'payout_release' AND t.reference = p.id::text),
		       (SELECT count(*) FROM payout_attempts a WHERE a.payout_id = p.id AND a.kind = 'lookup')
		FROM payouts p WHERE p.external_account LIKE 'ba\_lost\_%'`)
	if err != nil {
		return err
	}
	lost := map[string]int{}
	lookups := 0
	for rows.Next() {
		var id, dest, status string
		var released bool
		var n int
		if err := rows.Scan(&id, &dest, &status, &released, &n); err != nil {
			rows.Close()
			return err
		}
		lookups += n
		lost[status]++
		if released && live[id] {
			rep.violation("payout %s (%s) was given back while the PSP holds a live payout for it", id, dest)
			bad++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var wrongApplied, releasedWhilePaid int
	if err := su.pool.QueryRow(ctx, `SELECT count(*) FROM payout_evidence e JOIN payouts p ON p.id = e.payout_id
		WHERE e.verdict = 'applied' AND (e.amount <> p.amount OR lower(e.currency) <> p.currency)`).Scan(&wrongApplied); err != nil {
		return err
	}
	for _, o := range objs {
		if o.Status != "paid" && o.Status != "success" {
			continue
		}
		var released bool
		if err := su.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_transactions WHERE kind = 'payout_release' AND reference = $1)`,
			o.PayoutID).Scan(&released); err != nil {
			return err
		}
		if released {
			releasedWhilePaid++
		}
	}
	if wrongApplied > 0 || releasedWhilePaid > 0 {
		rep.violation("%d outcome events applied with another amount or currency than their payout's; %d payouts given back while the PSP paid them",
			wrongApplied, releasedWhilePaid)
		bad++
	}
	if bad == 0 {
		rep.passed("8. %d forged outcome events were refused as evidence (outcome_mismatch, dead-lettered, no money moved); "+
			"payouts whose first answer was lost ended %v after %d lookups, none given back while the PSP paid",
			refused, lost, lookups)
	}
	return nil
}
