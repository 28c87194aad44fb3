package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// check verifies the three promises' invariants against the database, the PSP
// stand-in's record and Kafka, and adds them to rep.
func (su *suite) check(ctx context.Context, wl *workload, rep *Report) error {
	for _, f := range []func(context.Context, *workload, *Report) error{
		su.checkWebhooks, su.checkPSP, su.checkPayouts, su.checkLedger, su.checkFailures, su.checkOrder,
		su.checkFrontDoor, su.checkEvidence, su.checkPoison, su.checkPickup, su.checkMoneyBack, su.checkResolutions,
		su.checkReversals, su.checkTransfersOnce, su.checkConnectedFailures,
	} {
		if err := f(ctx, wl, rep); err != nil {
			return err
		}
	}
	if rep.Week == nil {
		return nil
	}
	// The week profile's invariants (weekcheck.go).
	for _, f := range []func(context.Context, *workload, *Report) error{
		su.checkGivenBack, su.checkHoldsOnce, su.checkDeadlines, su.checkForged, su.checkOTP, su.checkSettlements,
	} {
		if err := f(ctx, wl, rep); err != nil {
			return err
		}
	}
	return su.weekFigures(ctx, rep)
}

func (su *suite) count(ctx context.Context, q string, args ...any) (int, error) {
	var n int
	err := su.pool.QueryRow(ctx, q, args...).Scan(&n)
	return n, err
}

// 1. Every webhook that got a 2xx is stored once and applied once; every
// one that got a 4xx left nothing behind.
func (su *suite) checkWebhooks(ctx context.Context, wl *workload, rep *Report) error {
	stored := map[string]bool{}
	rows, err := su.pool.Query(ctx, `SELECT provider || '/' || event_id FROM webhook_events`)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, id := range ids {
		stored[id] = true
	}
	credits := map[string]bool{}
	rows, err = su.pool.Query(ctx, `SELECT reference FROM ledger_transactions WHERE kind = 'credit'`)
	if err != nil {
		return err
	}
	refs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, r := range refs {
		credits[r] = true
	}
	acked, refused, unanswered := map[string]bool{}, 0, map[string]bool{}
	bad := 0
	for _, h := range wl.webhooks {
		key := h.Provider + "/" + h.EventID
		switch h.Status / 100 {
		case 2:
			acked[key] = true
			rep.Acknowledged++
			if !stored[key] {
				rep.violation("webhook %s answered %d but is not in webhook_events", key, h.Status)
				bad++
			}
			if h.Reference != "" && !credits[h.Reference] {
				rep.violation("payment %s acknowledged (%s) but never credited", h.Reference, key)
				bad++
			}
			if h.Kind == "bad_signature" || h.Kind == "malformed" {
				rep.violation("%s webhook %s was acknowledged", h.Kind, key)
				bad++
			}
		case 4:
			refused++
			if stored[key] && !acked[key] {
				rep.violation("webhook %s answered %d yet was stored", key, h.Status)
				bad++
			}
			if h.Kind != "bad_signature" && h.Kind != "malformed" {
				rep.violation("valid webhook %s refused with %d", key, h.Status)
				bad++
			}
		default:
			unanswered[key] = true // never answered: it may or may not have committed
		}
	}
	sent := map[string]bool{}
	for _, h := range wl.webhooks {
		sent[h.Provider+"/"+h.EventID] = true
	}
	for id := range stored {
		// The PSP stand-in's own webhooks (payout.paid, ...) are not the
		// workload's to account for.
		if sent[id] && !acked[id] && !unanswered[id] {
			rep.violation("webhook_events holds %s, which was never acknowledged", id)
			bad++
		}
	}
	// Applied once, in money: per wallet, the credits equal the user's
	// distinct acknowledged payments, plus at most those whose webhooks
	// never got an answer (they may have committed). Twin events, PSP
	// retries and redeliveries must not add a cent.
	type wallet struct{ user, currency string }
	ackedPay, maybePay := map[string]*webhook{}, map[string]*webhook{}
	for _, h := range wl.webhooks {
		if h.Reference == "" {
			continue
		}
		if h.Status/100 == 2 {
			ackedPay[h.Reference] = h
		} else if h.Status == 0 || h.Status >= 500 {
			maybePay[h.Reference] = h
		}
	}
	low, high := map[wallet]int64{}, map[wallet]int64{}
	for ref, h := range ackedPay {
		low[wallet{h.User, h.Currency}] += h.Amount
		high[wallet{h.User, h.Currency}] += h.Amount
		delete(maybePay, ref)
	}
	for _, h := range maybePay {
		high[wallet{h.User, h.Currency}] += h.Amount
	}
	rows, err = su.pool.Query(ctx, `SELECT w.owner, w.currency, sum(e.amount)::bigint FROM ledger_entries e
		JOIN wallets w ON w.id = e.wallet_id JOIN ledger_transactions t ON t.id = e.transaction_id
		WHERE t.kind = 'credit' AND w.kind = 'user' GROUP BY 1, 2`)
	if err != nil {
		return err
	}
	credited := map[wallet]int64{}
	for rows.Next() {
		var k wallet
		var sum int64
		if err := rows.Scan(&k.user, &k.currency, &sum); err != nil {
			return err
		}
		credited[k] = sum
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for k := range high {
		if _, ok := credited[k]; !ok {
			credited[k] = 0
		}
	}
	for k, got := range credited {
		if k.user == forgedUser {
			continue // judged by invariant 10 (weekcheck.go)
		}
		if got < low[k] || got > high[k] {
			rep.violation("wallet %s/%s credited %d; its acknowledged payments total %d (at most %d with unanswered ones)",
				k.user, k.currency, got, low[k], high[k])
			bad++
		}
	}
	if bad == 0 {
		rep.passed("1. every acknowledged webhook (%d distinct events) is stored once and its payment credited exactly once (%d wallets to the cent); %d refused ones left nothing",
			len(acked), len(credited), refused)
	}
	return nil
}

type pspObject struct {
	Provider string `json:"provider"`
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	PayoutID string `json:"payout_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Status   string `json:"status"`
	// AmountReversed is how much of a Stripe transfer the PSP took back.
	AmountReversed int64 `json:"amount_reversed"`
	// Account is the Stripe connected account a payout was made on
	// (Stripe-Account): the second step of a payout to one of its external
	// accounts. Empty for the platform's own objects.
	Account string `json:"account"`
	// FailureCode says why a failed object failed.
	FailureCode    string    `json:"failure_code"`
	IdempotencyKey string    `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
}

// pspObjects reads the objects with which the PSP paid the platform's
// money out: Paystack transfers, and Stripe transfers (and platform
// payouts). A connected account's own payouts are left out: the money left
// the platform with the transfer before it, and counting both would pay
// one payout twice (connectedPayouts reads those).
func (su *suite) pspObjects(ctx context.Context) ([]pspObject, error) {
	objs, err := fetchPSPObjects(ctx, stack.URL(su.ports.PSP))
	if err != nil {
		return nil, err
	}
	platform := objs[:0]
	for _, o := range objs {
		if o.Account == "" {
			platform = append(platform, o)
		}
	}
	return platform, nil
}

// fetchPSPObjects reads every object the stand-in at base created.
func fetchPSPObjects(ctx context.Context, base string) ([]pspObject, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/_psp/objects", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Items []pspObject `json:"items"`
	}
	return out.Items, json.NewDecoder(resp.Body).Decode(&out)
}

func paid(o pspObject) bool { return o.Status == "paid" || o.Status == "success" }

// 2. The PSP paid at most once per payout id, and paid exactly the payouts
// that are SUCCEEDED.
func (su *suite) checkPSP(ctx context.Context, _ *workload, rep *Report) error {
	objs, err := su.pspObjects(ctx)
	if err != nil {
		return err
	}
	paidCount := 0
	for _, o := range objs {
		if paid(o) {
			paidCount++
		}
	}
	bad := 0
	live := liveObjects(objs)
	for _, id := range sortedKeys(live) {
		if l := live[id]; len(l) > 1 {
			rep.violation("payout %s paid twice: the PSP holds %d live objects for it: %s", id, len(l), describe(l))
			bad++
		}
	}
	succeeded, err := su.count(ctx, `SELECT count(*) FROM payouts WHERE status = 'SUCCEEDED'`)
	if err != nil {
		return err
	}
	if paidCount != succeeded {
		// Name the payouts on either side, so a failure can be followed.
		var paidIDs []string
		for _, o := range objs {
			if paid(o) {
				paidIDs = append(paidIDs, o.PayoutID)
			}
		}
		rows, err := su.pool.Query(ctx, `
			SELECT id::text || ' ' || status FROM payouts WHERE (id::text = ANY($1)) <> (status = 'SUCCEEDED') ORDER BY id LIMIT 10`, paidIDs)
		if err != nil {
			return err
		}
		odd, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		rep.violation("the PSP paid %d payouts but %d are SUCCEEDED; paid at the PSP xor SUCCEEDED here: %s",
			paidCount, succeeded, strings.Join(odd, ", "))
		bad++
	}
	if bad == 0 {
		rep.passed("2. the PSP paid %d payouts, at most once per payout id, and exactly the SUCCEEDED ones", paidCount)
	}
	return nil
}

// 3. Every payout is finished: SUCCEEDED or FINALIZED (failed, hold
// released once). NEEDS_REVIEW is not finished: after the drain the
// operator (operator.go) has resolved every one the PSP's record decides,
// and one left is a violation. The holds account nets to zero for every
// finished payout.
func (su *suite) checkPayouts(ctx context.Context, wl *workload, rep *Report) error {
	rows, err := su.pool.Query(ctx, `SELECT status, count(*) FROM payouts GROUP BY status`)
	if err != nil {
		return err
	}
	rep.Payouts = map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return err
		}
		rep.Payouts[s] = n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// Pickup: from the payout's creation to the worker's first transition.
	// Reported, not judged: under a 30 s Kafka outage and relay backoff a
	// minute is legitimate, but a stuck consumer group shows here first.
	var p50, p99, longest float64
	if err := su.pool.QueryRow(ctx, `
		SELECT count(*), coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY d), 0),
		       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY d), 0), coalesce(max(d), 0)
		FROM (SELECT extract(epoch FROM min(at) FILTER (WHERE from_status IS NOT NULL)
		                              - min(at) FILTER (WHERE from_status IS NULL)) AS d
		      FROM payout_transitions GROUP BY payout_id) x
		WHERE d IS NOT NULL`).Scan(&rep.Pickup.Payouts, &p50, &p99, &longest); err != nil {
		return err
	}
	rep.Pickup.P50, rep.Pickup.P99, rep.Pickup.Max = seconds(p50), seconds(p99), seconds(longest)
	bad := 0
	for s, n := range rep.Payouts {
		if !payoutstate.Status(s).Closed() {
			rows, err := su.pool.Query(ctx, `SELECT id::text FROM payouts WHERE status = $1 ORDER BY id LIMIT 10`, s)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			rep.violation("%d payouts left in %s, not final after the drain and the operator: %s", n, s, strings.Join(ids, ", "))
			bad++
		}
	}
	heldFinished, err := su.count(ctx, `SELECT count(*) FROM (SELECT p.id FROM payouts p
		JOIN ledger_transactions t ON t.reference = p.id::text JOIN ledger_entries e ON e.transaction_id = t.id
		JOIN wallets w ON w.id = e.wallet_id AND w.kind = 'system' AND w.owner = 'payout_holds'
		WHERE p.status IN ('SUCCEEDED', 'FINALIZED') GROUP BY p.id HAVING sum(e.amount) <> 0) x`)
	if err != nil {
		return err
	}
	if heldFinished > 0 {
		rep.violation("%d finished payouts leave a balance on the holds account", heldFinished)
		bad++
	}
	doubleRelease, err := su.count(ctx, `SELECT count(*) FROM (SELECT reference FROM ledger_transactions
		WHERE kind = 'payout_release' GROUP BY reference HAVING count(*) > 1) x`)
	if err != nil {
		return err
	}
	unreleased, err := su.count(ctx, `SELECT count(*) FROM payouts p WHERE p.status = 'FINALIZED'
		AND EXISTS (SELECT 1 FROM ledger_transactions t WHERE t.kind = 'payout_hold' AND t.reference = p.id::text)
		AND NOT EXISTS (SELECT 1 FROM ledger_transactions t WHERE t.kind IN ('payout_release', 'payout_return') AND t.reference = p.id::text)`)
	if err != nil {
		return err
	}
	if doubleRelease > 0 || unreleased > 0 {
		rep.violation("holds: %d released twice, %d FINALIZED payouts never given back", doubleRelease, unreleased)
		bad++
	}
	// A payout reversed in parts gives back each part once: never more
	// than the payout in all.
	overReturned, err := su.count(ctx, `SELECT count(*) FROM payouts p
		WHERE (SELECT coalesce(sum(e.amount), 0) FROM ledger_transactions t JOIN ledger_entries e ON e.transaction_id = t.id
		       WHERE t.kind = 'payout_return' AND e.amount > 0
		         AND (t.reference = p.id::text OR t.reference LIKE p.id::text || ':%')) > p.amount`)
	if err != nil {
		return err
	}
	if overReturned > 0 {
		rep.violation("returns: %d payouts gave back more than they paid", overReturned)
		bad++
	}
	// Idempotency-Keys: a repeat with the same body answers the same
	// payout, with another body a 422.
	first := map[string]string{}
	for _, p := range wl.payouts {
		if p.Expect == "new" && p.PayoutID != "" {
			first[p.Key] = p.PayoutID
		}
	}
	for _, p := range wl.payouts {
		switch {
		case p.Expect == "same" && p.Status == 202 && first[p.Key] != "" && p.PayoutID != first[p.Key]:
			rep.violation("key %s answered payout %s, then %s", p.Key, first[p.Key], p.PayoutID)
			bad++
		case p.Expect == "conflict" && first[p.Key] != "" && p.Status != 0 && p.Status != 422 && p.Status < 500:
			// Only a key whose first request was answered with a payout is
			// held to it: an unanswered or refused first request may have
			// stored nothing, and then another body is a new payout.
			rep.violation("key %s reused with another body answered %d, want 422", p.Key, p.Status)
			bad++
		}
	}
	if bad == 0 {
		var states []string
		for _, s := range sortedKeys(rep.Payouts) {
			states = append(states, fmt.Sprintf("%s %d", s, rep.Payouts[s]))
		}
		swept, err := su.count(ctx, `SELECT count(DISTINCT payout_id) FROM payout_evidence WHERE event_type = 'lookup' AND verdict = 'applied'`)
		if err != nil {
			return err
		}
		rep.passed("3. every payout is final (%s; %d finished by the sweeper from the PSP's record), none left in review, holds released exactly once and netting to zero, keys idempotent",
			strings.Join(states, ", "), swept)
	}
	return nil
}

// 4. The ledger reconciles: every transaction sums to zero, every balance
// equals its entries and none is negative, money in equals credits, and
// money out equals what the PSP paid.
func (su *suite) checkLedger(ctx context.Context, _ *workload, rep *Report) error {
	var unbalanced, drift, negative int
	err := su.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM (SELECT 1 FROM ledger_entries GROUP BY transaction_id, currency HAVING sum(amount) <> 0) x),
		(SELECT count(*) FROM wallets w WHERE w.kind = 'user'
			AND w.balance <> coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.wallet_id = w.id), 0)),
		(SELECT count(*) FROM wallets WHERE kind = 'user' AND balance < 0)`).Scan(&unbalanced, &drift, &negative)
	if err != nil {
		return err
	}
	bad := 0
	if unbalanced+drift+negative > 0 {
		rep.violation("ledger: %d unbalanced transactions, %d balances off their entries, %d negative", unbalanced, drift, negative)
		bad++
	}
	// Per currency: wallets + holds + paid out - returned = credited, where
	// "wallets" counts what they owe (receivables) and what disputes hold,
	// and "paid out" what left to the PSP through refunds and lost disputes.
	rows, err := su.pool.Query(ctx, `
		SELECT e.currency,
		       coalesce(sum(e.amount) FILTER (WHERE w.kind = 'user' OR (w.kind = 'system' AND w.owner IN ('disputes', 'receivables'))), 0)
		       + coalesce(sum(e.amount) FILTER (WHERE t.kind IN ('refund', 'refund_reversal', 'dispute_loss') AND w.kind = 'system' AND w.owner LIKE 'psp_clearing:%'), 0),
		       coalesce(sum(e.amount) FILTER (WHERE w.kind = 'system' AND w.owner = 'payout_holds'), 0),
		       coalesce(sum(e.amount) FILTER (WHERE t.kind = 'payout_settle' AND w.kind = 'system' AND w.owner LIKE 'psp_clearing:%'), 0),
		       coalesce(sum(-e.amount) FILTER (WHERE t.kind = 'payout_return' AND w.kind = 'system'), 0),
		       coalesce(sum(e.amount) FILTER (WHERE t.kind = 'credit' AND w.kind = 'user'), 0)
		FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id JOIN ledger_transactions t ON t.id = e.transaction_id
		GROUP BY e.currency`)
	if err != nil {
		return err
	}
	settled := map[string]int64{}
	for rows.Next() {
		var cur string
		var users, holds, paidOut, returned, credited int64
		if err := rows.Scan(&cur, &users, &holds, &paidOut, &returned, &credited); err != nil {
			return err
		}
		settled[cur] = paidOut - returned
		if users+holds+paidOut-returned != credited {
			rep.violation("%s: wallets %d + holds %d + paid out %d - returned %d != credited %d", cur, users, holds, paidOut, returned, credited)
			bad++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	objs, err := su.pspObjects(ctx)
	if err != nil {
		return err
	}
	// What the PSP paid out and still has out: a transfer reversed in part
	// is paid, less the parts it took back.
	pspPaid := map[string]int64{}
	for _, o := range objs {
		if paid(o) {
			pspPaid[strings.ToLower(o.Currency)] += o.Amount - o.AmountReversed
		}
	}
	for cur, amt := range pspPaid {
		if settled[cur] != amt {
			rep.violation("%s: the PSP paid out %d but the ledger settled %d", cur, amt, settled[cur])
			bad++
		}
	}
	if bad == 0 {
		rep.passed("4. the ledger reconciles, money in equals credits, money out equals what the PSP paid")
	}
	return nil
}

// 5. Every failure that was not retried to success has one dead letter with
// its metadata, open until replayed; nothing is stuck in the outbox.
func (su *suite) checkFailures(ctx context.Context, _ *workload, rep *Report) error {
	var stuck, incomplete, rejectedWithout, doubleOpen int
	err := su.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM transaction_outbox WHERE status = 'processing' OR finished_at IS NULL),
		(SELECT count(*) FROM dead_letters WHERE error = '' OR error_class = '' OR original_topic = ''
			OR jsonb_array_length(retry_history) = 0
			OR (source = 'consumer' AND (consumer_group IS NULL OR original_offset IS NULL))),
		(SELECT count(*) FROM payouts p WHERE p.status = 'FINALIZED' AND p.last_error LIKE '%account_invalid%'
			AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE position(convert_to(p.id::text, 'UTF8') in d.payload) > 0)),
		(SELECT count(*) FROM (SELECT convert_from(payload, 'UTF8')::jsonb->>'payout_id' AS p FROM dead_letters
			WHERE status = 'open' AND original_topic = 'aegis.transactions' AND get_byte(payload, 0) = 123
			GROUP BY 1 HAVING count(*) > 1) x)`).
		Scan(&stuck, &incomplete, &rejectedWithout, &doubleOpen)
	if err != nil {
		return err
	}
	total, err := su.count(ctx, `SELECT count(*) FROM dead_letters`)
	if err != nil {
		return err
	}
	rep.DeadLetters = total
	retries, err := su.count(ctx, `SELECT coalesce(sum(retry_count), 0)::int + (SELECT count(*) FROM payout_transitions WHERE to_status = 'RETRYING')::int
		FROM `+published.All+` o`)
	if err != nil {
		return err
	}
	rep.Retries = retries
	bad := 0
	if stuck > 0 {
		rep.violation("%d outbox rows still unpublished or in processing", stuck)
		bad++
	}
	if incomplete > 0 {
		rep.violation("%d dead letters lack metadata (error, class, origin, group, offset, history)", incomplete)
		bad++
	}
	if rejectedWithout > 0 {
		rep.violation("%d payouts the PSP rejected have no dead letter", rejectedWithout)
		bad++
	}
	if doubleOpen > 0 {
		rep.violation("%d payouts have more than one open dead letter", doubleOpen)
		bad++
	}
	if bad == 0 {
		rep.passed("5. every failure has one dead letter with its metadata (%d in all); nothing stuck in the outbox", total)
	}
	return nil
}

// 6. Per-key order held on aegis.webhook.pending: per key, records reached
// Kafka (first occurrences) in the order their outbox rows committed.
// Replays are new rows by design and are left out.
func (su *suite) checkOrder(ctx context.Context, _ *workload, rep *Report) error {
	rows, err := su.pool.Query(ctx, `SELECT id, partition_key, headers->>'message_id' FROM `+published.Rows+` o
		WHERE topic = $1 AND NOT headers ? 'replay_of'`, kafkax.TopicWebhookPending)
	if err != nil {
		return err
	}
	outboxID := map[string]int64{}
	want := 0
	for rows.Next() {
		var id int64
		var key, msg string
		if err := rows.Scan(&id, &key, &msg); err != nil {
			return err
		}
		outboxID[msg] = id
		want++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", su.ports.Kafka)),
		kgo.ConsumeTopics(kafkax.TopicWebhookPending), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := map[string]bool{}
	last := map[string]int64{}
	bad := 0
	readCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	idle := 0
	for len(seen) < want && idle < 5 && readCtx.Err() == nil {
		fetchCtx, stop := context.WithTimeout(readCtx, 2*time.Second)
		fs := cl.PollFetches(fetchCtx)
		stop()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			msg := kafkax.Header(r, kafkax.HeaderMessageID)
			id, ok := outboxID[msg]
			if !ok || seen[msg] {
				return // a replay, or an at-least-once duplicate
			}
			seen[msg] = true
			key := string(r.Key)
			if id < last[key] {
				if bad < 5 {
					rep.violation("key %s: outbox row %d reached Kafka after row %d", key, id, last[key])
				}
				bad++
			}
			last[key] = id
		})
		if n == 0 {
			idle++
		}
	}
	if len(seen) < want {
		rep.violation("only %d of %d webhook records found on Kafka", len(seen), want)
		bad++
	}
	if bad == 0 {
		rep.passed("6. per-key order held on %s (%d records over %d keys)", kafkax.TopicWebhookPending, len(seen), len(last))
	}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
