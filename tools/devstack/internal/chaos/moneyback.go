package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The money-back part of the run: refunds (partial, full, and
// refunds that fail after they were created) and disputes (won and lost) of
// Stripe payments the workload paid earlier, signed like the PSP's own
// events, sometimes twice and sometimes in the wrong order (a refund's
// failure before its creation, a dispute's close before its opening). The
// invariants: every object is reflected in the ledger exactly once with its
// final outcome; every wallet's balance less what it owes equals its
// credits less refunds less lost disputes, plus its payout postings; the
// disputes account is zero once every dispute is closed, and the
// receivables account equals what the wallets owe.

// paidPayment is a Stripe payment the workload paid and may take money back from.
type paidPayment struct {
	pi, user string
	amount   int64
	left     int64 // not yet promised to a refund or dispute
	ackedAt  time.Time
}

// moneyBack is one refund or dispute the workload sent.
type moneyBack struct {
	Kind    string // refund | dispute
	ID      string
	Payment string // ledger reference of the payment (stripe:pi_…)
	User    string
	Amount  int64
	// Outcome is the object's final state: refunded | void | won | lost.
	Outcome string
	// Acked: every event about the object was answered 2xx.
	Acked bool
}

type moneyBackLog struct {
	mu       sync.Mutex
	payments []*paidPayment
	objects  []*moneyBack
}

// paid records a Stripe payment acknowledged by webhook-api.
func (w *workload) paid(pi, user string, amount int64) {
	w.back.mu.Lock()
	w.back.payments = append(w.back.payments, &paidPayment{pi: pi, user: user, amount: amount, left: amount, ackedAt: time.Now()})
	w.back.mu.Unlock()
}

// moneyBackOp draws, from the workload's seeded source, whether the next
// operation takes money back and returns it (nil otherwise). Called with
// w.mu held. A payment is picked among those acknowledged a while ago (a
// refund that overtakes its credit is dead-lettered and replayed later, but
// that is the exception, not the workload); its amount is reserved at once,
// so no two operations ever ask for more than the payment.
func (w *workload) moneyBackOp(n int) func() {
	if w.rng.Float64() >= 0.08 {
		return nil
	}
	pick, r, share := w.rng.IntN(1<<30), w.rng.Float64(), w.rng.Float64()
	reversed, dup := w.rng.Float64() < 0.5, w.rng.Float64() < 0.15
	w.back.mu.Lock()
	defer w.back.mu.Unlock()
	var eligible []*paidPayment
	for _, p := range w.back.payments {
		if p.left > 0 && time.Since(p.ackedAt) > 3*time.Second {
			eligible = append(eligible, p)
		}
	}
	if len(eligible) == 0 {
		return nil
	}
	p := eligible[pick%len(eligible)]
	o := &moneyBack{Payment: "stripe:" + p.pi, User: p.user}
	partial := max(1, int64(float64(p.left)*share))
	switch {
	case r < 0.30:
		o.Kind, o.Outcome, o.Amount = "refund", "refunded", partial
	case r < 0.45:
		o.Kind, o.Outcome, o.Amount = "refund", "refunded", p.left
	case r < 0.60:
		o.Kind, o.Outcome, o.Amount = "refund", "void", partial
	case r < 0.80:
		o.Kind, o.Outcome, o.Amount = "dispute", "won", partial
	default:
		o.Kind, o.Outcome, o.Amount = "dispute", "lost", partial
	}
	p.left -= o.Amount
	if o.Kind == "refund" {
		o.ID = fmt.Sprintf("re_chaos_%d", n)
	} else {
		o.ID = fmt.Sprintf("dp_chaos_%d", n)
	}
	w.back.objects = append(w.back.objects, o)
	return func() { w.sendMoneyBack(n, p.pi, o, reversed, dup) }
}

// sendMoneyBack sends the object's events: a refund's creation (and its
// failure), a dispute's opening and close, in order or reversed, and
// sometimes one of them twice.
func (w *workload) sendMoneyBack(n int, pi string, o *moneyBack, reversed, dup bool) {
	type ev struct{ id, typ, status string }
	var evs []ev
	switch {
	case o.Kind == "refund" && o.Outcome == "refunded":
		evs = []ev{{fmt.Sprintf("evt_chaos_rc_%d", n), "refund.created", "succeeded"}}
	case o.Kind == "refund":
		evs = []ev{{fmt.Sprintf("evt_chaos_rc_%d", n), "refund.created", "succeeded"},
			{fmt.Sprintf("evt_chaos_ru_%d", n), "refund.updated", "failed"}}
	default:
		evs = []ev{{fmt.Sprintf("evt_chaos_do_%d", n), "charge.dispute.created", "needs_response"},
			{fmt.Sprintf("evt_chaos_dc_%d", n), "charge.dispute.closed", o.Outcome}}
	}
	if reversed && len(evs) == 2 {
		evs[0], evs[1] = evs[1], evs[0]
	}
	if dup {
		evs = append(evs, evs[0])
	}
	acked := true
	for _, e := range evs {
		object := "refund"
		if o.Kind == "dispute" {
			object = "dispute"
		}
		obj := fmt.Sprintf(`{"id":%q,"object":%q,"amount":%d,"currency":"usd","status":%q,"charge":"ch_chaos_%s","payment_intent":%q}`,
			o.ID, object, o.Amount, e.status, pi, pi)
		status := w.sendStripe(w.stripeEvent(e.id, e.typ, time.Now().Unix(), obj))
		acked = acked && status/100 == 2
		w.record(&webhook{Provider: "stripe", EventID: e.id, Kind: o.Kind, Status: status})
	}
	w.back.mu.Lock()
	o.Acked = acked
	w.back.mu.Unlock()
}

// 11. Money that goes back: every refund and dispute is in the ledger once
// with its final outcome, every wallet's balance accounts for it, and the
// disputes and receivables accounts are what the finished objects leave.
func (su *suite) checkMoneyBack(ctx context.Context, wl *workload, rep *Report) error {
	wl.back.mu.Lock()
	objects := append([]*moneyBack(nil), wl.back.objects...)
	wl.back.mu.Unlock()
	type posted struct {
		state string
		kinds map[string]int
	}
	got := map[string]*posted{}
	rows, err := su.pool.Query(ctx, `
		SELECT r.object_id, r.state, t.kind, count(t.id)::int
		FROM payment_returns r
		LEFT JOIN ledger_transactions t ON t.reference = r.provider || ':' || r.object_id
		WHERE r.provider = 'stripe'
		GROUP BY 1, 2, 3`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, state string
		var kind *string
		var n int
		if err := rows.Scan(&id, &state, &kind, &n); err != nil {
			return err
		}
		if got[id] == nil {
			got[id] = &posted{state: state, kinds: map[string]int{}}
		}
		if kind != nil {
			got[id].kinds[*kind] += n
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	want := map[string]map[string]int{
		"refunded": {"refund": 1},
		"won":      {"dispute_hold": 1, "dispute_release": 1},
		"lost":     {"dispute_hold": 1, "dispute_loss": 1},
	}
	bad := 0
	owedBack := map[string]int64{} // user → refunds standing + disputes lost
	sent := 0
	for _, o := range objects {
		if !o.Acked {
			// An event never answered 2xx may or may not be in (check 1
			// judges the answers): the wallet is judged on what is.
			if g := got[o.ID]; g != nil && (g.state == "refunded" || g.state == "lost") {
				owedBack[o.User] += o.Amount
			}
			continue
		}
		sent++
		if o.Outcome == "refunded" || o.Outcome == "lost" {
			owedBack[o.User] += o.Amount
		}
		g := got[o.ID]
		if g == nil {
			rep.violation("%s %s (%s) acknowledged but not in the ledger", o.Kind, o.ID, o.Outcome)
			bad++
			continue
		}
		if g.state != o.Outcome {
			rep.violation("%s %s is %s in the ledger, the PSP says %s", o.Kind, o.ID, g.state, o.Outcome)
			bad++
			continue
		}
		if o.Outcome == "void" {
			// Voided before or after it was posted: nothing, or a refund and its reversal.
			nothing := len(g.kinds) == 0
			reversed := g.kinds["refund"] == 1 && g.kinds["refund_reversal"] == 1 && len(g.kinds) == 2
			if !nothing && !reversed {
				rep.violation("voided refund %s posted %v", o.ID, g.kinds)
				bad++
			}
			continue
		}
		if fmt.Sprint(g.kinds) != fmt.Sprint(want[o.Outcome]) {
			rep.violation("%s %s (%s) posted %v, want %v", o.Kind, o.ID, o.Outcome, g.kinds, want[o.Outcome])
			bad++
		}
	}
	// Per wallet: balance - owed = credits + payout postings - refunds - lost disputes.
	rows, err = su.pool.Query(ctx, `
		SELECT w.owner, w.balance - w.owed,
		       coalesce((SELECT sum(e.amount) FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id
		                 WHERE e.wallet_id = w.id AND t.kind IN ('credit', 'payout_hold', 'payout_release', 'payout_return')), 0)::bigint
		FROM wallets w WHERE w.kind = 'user' AND w.currency = 'usd'`)
	if err != nil {
		return err
	}
	wallets := 0
	for rows.Next() {
		var user string
		var net, inOut int64
		if err := rows.Scan(&user, &net, &inOut); err != nil {
			return err
		}
		wallets++
		if net != inOut-owedBack[user] {
			rep.violation("wallet %s: balance - owed %d != credits and payouts %d - refunds and lost disputes %d",
				user, net, inOut, owedBack[user])
			bad++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var disputes, receivables, owed int64
	if err := su.pool.QueryRow(ctx, `SELECT
		coalesce((SELECT sum(e.amount) FROM ledger_entries e JOIN wallets a ON a.id = e.wallet_id
		          WHERE a.kind = 'system' AND a.owner = 'disputes'), 0)::bigint,
		coalesce((SELECT sum(e.amount) FROM ledger_entries e JOIN wallets a ON a.id = e.wallet_id
		          WHERE a.kind = 'system' AND a.owner = 'receivables'), 0)::bigint,
		coalesce((SELECT sum(owed) FROM wallets WHERE kind = 'user'), 0)::bigint`).Scan(&disputes, &receivables, &owed); err != nil {
		return err
	}
	if disputes != 0 {
		rep.violation("the disputes account holds %d after every dispute closed", disputes)
		bad++
	}
	if receivables != -owed {
		rep.violation("the receivables account is %d but the wallets owe %d", receivables, owed)
		bad++
	}
	if bad == 0 {
		rep.passed("11. money back: %d refunds and disputes each in the ledger once with their outcome; %d wallets = credits - refunds - lost disputes ± payouts; disputes account 0, receivables %d = what wallets owe",
			sent, wallets, -receivables)
	}
	return nil
}
