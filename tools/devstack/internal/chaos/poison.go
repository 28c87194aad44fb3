package chaos

import (
	"context"
	"fmt"
	"time"
)

// The poison workload: a wallet credited 9,000,000,000,000,000,000
// twice. The first credit is an ordinary one; the second overflows the
// balance, which Postgres refuses every time (SQLSTATE 22003). A worker that
// retries such a refusal in place blocks its batch, and with it every
// partition it holds; a correct one dead-letters the credit (class
// permanent) and goes on. checkPoison judges it; a payout-worker built with
// -tags chaos and run with PlantPoisonRetryEnv=1 (aegis-chaos -plant-poison)
// plants the old behaviour to prove the check notices.
const poisonAmount = 9_000_000_000_000_000_000

// poisonUser is the wallet the poison workload overflows; no other
// operation touches it.
func (w *workload) poisonUser() string { return "chaos-poison" }

// sendPoison sends the two credits after delay; the second is the poison.
func (w *workload) sendPoison(ctx context.Context, delay time.Duration) {
	sleep(ctx, delay)
	if ctx.Err() != nil {
		return
	}
	user := w.poisonUser()
	for i, kind := range []string{"credit", "poison"} {
		pi := fmt.Sprintf("pi_chaos_poison_%d", i)
		id := fmt.Sprintf("evt_chaos_poison_%d", i)
		obj := fmt.Sprintf(`{"id":%q,"object":"payment_intent","amount":%d,"amount_received":%d,"currency":"usd","status":"succeeded","metadata":{"user_id":%q}}`,
			pi, int64(poisonAmount), int64(poisonAmount), user)
		h := &webhook{Provider: "stripe", EventID: id, Kind: kind, Reference: "stripe:" + pi, User: user,
			Amount: poisonAmount, Currency: "usd"}
		h.Status = w.sendStripe(w.stripeEvent(id, "payment_intent.succeeded", time.Now().Unix(), obj))
		if kind == "poison" {
			w.mu.Lock()
			w.poison = h
			w.sent[kind]++
			w.mu.Unlock()
			continue
		}
		w.record(h)
	}
}

// 9. The poison credit is acknowledged, never credited, and dead-lettered by
// the worker with class permanent and the database's refusal; the rest of
// the run shows (checks 1 and pickup) that nothing else waited on it.
func (su *suite) checkPoison(ctx context.Context, wl *workload, rep *Report) error {
	h := wl.poison
	if h == nil {
		return nil // the workload phase ended before it was sent
	}
	bad := 0
	if h.Status/100 != 2 {
		rep.violation("the poison credit %s was answered %d", h.EventID, h.Status)
		bad++
	}
	credited, err := su.count(ctx, `SELECT count(*) FROM ledger_transactions WHERE kind = 'credit' AND reference = $1`, h.Reference)
	if err != nil {
		return err
	}
	if credited > 0 {
		rep.violation("the poison credit %s was applied", h.Reference)
		bad++
	}
	letters, err := su.count(ctx, `SELECT count(*) FROM dead_letters WHERE source = 'consumer'
		AND original_topic = 'aegis.webhook.pending' AND error_class = 'permanent' AND error LIKE '%22003%'
		AND position(convert_to($1, 'UTF8') in payload) > 0`, h.EventID)
	if err != nil {
		return err
	}
	if letters == 0 {
		rep.violation("the poison credit %s (its balance overflows) was never dead-lettered as permanent", h.EventID)
		bad++
	}
	if bad == 0 {
		rep.passed("9. the poison credit (a balance overflow Postgres refuses) was dead-lettered as permanent (%d letters) and applied nowhere", letters)
	}
	return nil
}
