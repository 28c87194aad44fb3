package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
)

// startWith is start with a PSP settle delay and extra service environment.
// It copies start's configuration until start takes options.
// TestReplayPutsTheEventBackThroughThePipelineOnce: a payout whose PSP
// answer is lost on its last attempt ends NEEDS_REVIEW with a dead letter;
// an operator replays it through dlq-admin; the worker applies the replay
// once, the PSP (which did execute the lost attempt) pays once, and the
// ledger balances. A replay of something that had succeeded changes nothing.
func TestReplayPutsTheEventBackThroughThePipelineOnce(t *testing.T) {
	t.Parallel()
	// The PSP never settles on its own here: the test settles the payout
	// when it wants to, so the lost attempt's object cannot finish the
	// payout behind the test's back.
	// A dead letter is alerted once, by dlq-admin, though the worker wrote
	// it (its ALERT log line), and pages as dlq-admin's open-letter gauge
	// (AegisDeadLetterOpen), which resolves when the letter is replayed.
	s := startWith(t, "0", map[string]string{"PSP_MAX_ATTEMPTS": "2", "PSP_CALL_TIMEOUT": "1s", "PSP_SETTLE_WINDOW": "2s",
		"DLQ_CHECK_INTERVAL": "200ms"})
	ctx := context.Background()
	user := "rhea"
	wallet := func() float64 {
		w := s.do(http.MethodGet, s.api+"/v1/wallets/"+user, nil, s.bearer(s.token))
		if w.status != 200 {
			return -1
		}
		return w.body["balance"].(float64)
	}
	require.Equal(t, 200, s.signedStripe(payment("evt_replay_credit", user, 5000)).status)
	s.registerDestination(user, "stripe", "acct_rhea", "") // paid by a transfer alone
	s.eventually("wallet credited", func() bool { return wallet() == 5000 })

	// Attempt 1 times out before the PSP executes it; attempt 2 executes
	// (the PSP creates the transfer) and the answer is lost. Two attempts
	// are all the worker has: NEEDS_REVIEW, the hold kept, a dead letter.
	f := s.do(http.MethodPut, s.psp+"/_psp/faults", []byte(`{"provider":"stripe","timeout":"3s","next":[`+
		`{"kind":"timeout","count":1},{"kind":"timeout_after_create","count":1}]}`), nil)
	require.Equal(t, 200, f.status, f.raw)
	p := s.do(http.MethodPost, s.api+"/v1/payouts", []byte(`{"user_id":"rhea","amount":1500,"currency":"usd","destination":"acct_rhea","provider":"stripe"}`),
		map[string]string{"Authorization": "Bearer " + s.token, "Idempotency-Key": "e2e-replay-payout"})
	require.Equal(t, 202, p.status, p.raw)
	pid := p.body["payout_id"].(string)
	status := func() string {
		g := s.do(http.MethodGet, s.api+"/v1/payouts/"+pid, nil, s.bearer(s.token))
		st, _ := g.body["status"].(string)
		return st
	}
	s.eventually("payout needs review", func() bool { return status() == "NEEDS_REVIEW" })
	require.EqualValues(t, 3500, wallet(), "the hold is kept while the outcome is unknown")

	var letter map[string]any
	s.eventually("dead letter in dlq-admin", func() bool {
		l := s.do(http.MethodGet, s.dlq+"/v1/dead-letters?topic=aegis.transactions&status=open", nil, s.bearer(s.opToken))
		items, _ := l.body["items"].([]any)
		if len(items) != 1 {
			return false
		}
		letter = items[0].(map[string]any)
		return true
	})
	require.Contains(t, letter["error"], "may have executed the last attempt")
	dlID := int64(letter["id"].(float64))
	reviewKey := "dead_letter:aegis.transactions:" + letter["error_class"].(string)
	s.eventually("dlq-admin alerts on the payout's dead letter", func() bool { n, _ := s.alerts(reviewKey); return n >= 1 })
	openLetters := func(class string) float64 {
		v, _ := s.metric(s.dlq, fmt.Sprintf(`aegis_dlq_open_letters{class=%q,topic="aegis.transactions"}`, class))
		return v
	}
	reviewClass := letter["error_class"].(string)
	s.eventually("the open letter is a condition on dlq-admin's /metrics", func() bool { return openLetters(reviewClass) == 1 })

	// A poison message: the worker's consumer publishes it to
	// aegis.transactions.dlq itself; dlq-admin stores it and pages.
	cl, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", s.cfg.Ports.Kafka)))
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "aegis.transactions", Key: []byte("mallory"), Value: []byte("not json")}).FirstErr())
	cl.Close()
	s.eventually("dlq-admin pages for the poison message", func() bool {
		n, _ := s.alerts("dead_letter:aegis.transactions:poison")
		return n >= 1
	})
	objects := func() []any {
		o := s.do(http.MethodGet, s.psp+"/_psp/objects?payout_id="+pid, nil, nil)
		items, _ := o.body["items"].([]any)
		return items
	}
	require.Len(t, objects(), 1, "the lost attempt did execute at the PSP")

	// A viewer may look but not replay.
	viewer := "dev-viewer-token-0123456789"
	require.Equal(t, 403, s.do(http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", s.dlq, dlID), nil, s.bearer(viewer)).status)

	// The operator replays it.
	r := s.do(http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", s.dlq, dlID), []byte(`{"reason":"checked the PSP: retry with the same key"}`), s.bearer(s.opToken))
	require.Equal(t, 202, r.status, r.raw)
	require.Equal(t, "replayed", r.body["dead_letter"].(map[string]any)["status"])
	outboxID := int64(r.body["outbox_id"].(float64))

	// The replayed attempt looks the payout up at the PSP first and adopts
	// the object the lost attempt made: nothing new is created. (That object
	// was created under an attempt-scoped key: the first attempt timed out
	// before reaching the PSP, a lookup confirmed it made nothing, and only
	// then did the next attempt use a new key.)
	s.eventually("payout sent again", func() bool { st := status(); return st == "AWAITING_RESPONSE" || st == "SUCCEEDED" })
	objs := objects()
	require.Len(t, objs, 1, "the PSP holds exactly one payout for the payout id")
	obj := objs[0].(map[string]any)
	var key string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(), `SELECT psp_key FROM payouts WHERE id = $1`, pid).Scan(&key))
	require.Equal(t, key, obj["idempotency_key"], "the payout records the key of the object it holds")
	require.True(t, strings.HasPrefix(key, "aegis-payout-"+pid), key)
	settle := s.do(http.MethodPost, fmt.Sprintf("%s/_psp/objects/%s/settle", s.psp, obj["id"]), []byte(`{"outcome":"paid"}`), nil)
	require.Equal(t, 200, settle.status, settle.raw)
	s.eventually("payout paid", func() bool { return status() == "SUCCEEDED" })
	require.Len(t, objects(), 1)
	require.EqualValues(t, 3500, wallet())

	// Exactly once: one outbox row for the replay, published (and so
	// deleted); the worker recorded its replay message id once.
	require.Equal(t, 1, s.count(`SELECT count(*) FROM `+published.All+` o WHERE headers->>'replay_of' = $1`, fmt.Sprint(dlID)))
	s.eventually("replay row published", func() bool {
		return s.count(`SELECT count(*) FROM `+published.Rows+` o WHERE id = $1`, outboxID) == 1 &&
			s.count(`SELECT count(*) FROM transaction_outbox WHERE id = $1`, outboxID) == 0
	})
	require.Equal(t, 1, s.count(`SELECT count(*) FROM processed_events WHERE consumer_group = 'payout-worker' AND event_id LIKE $1`,
		fmt.Sprintf("%%:replay:%d:1", dlID)))
	require.Equal(t, 1, s.count(`SELECT count(*) FROM payout_transitions WHERE payout_id = $1 AND from_status = 'NEEDS_REVIEW'`, pid),
		"the replay moved the payout on once")

	// Each letter was alerted exactly once across the four services:
	// dlq-admin raised it; the worker that wrote them only logged and
	// counted them as dead letters.
	for _, key := range []string{reviewKey, "dead_letter:aegis.transactions:poison"} {
		n, services := s.alerts(key)
		require.Equal(t, 1, n, "%s alerted by %v", key, services)
		require.Equal(t, []string{"dlq-admin"}, services, key)
	}
	// The replayed letter's condition resolved; the poison one still pages.
	s.eventually("the replayed letter's page resolves", func() bool { return openLetters(reviewClass) == 0 })
	require.Equal(t, 1.0, openLetters("poison"))

	// The ledger balances.
	require.Zero(t, s.count(`SELECT count(*) FROM (SELECT 1 FROM ledger_entries GROUP BY transaction_id, currency HAVING sum(amount) <> 0) x`))
	require.Equal(t, 3500, s.count(`SELECT sum(e.amount)::int FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id WHERE w.kind = 'user' AND w.owner = $1`, user))
	require.Equal(t, 1, s.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_settle'`))

	// The letter is replayed, and a second replay is refused.
	d := s.do(http.MethodGet, fmt.Sprintf("%s/v1/dead-letters/%d", s.dlq, dlID), nil, s.bearer(viewer))
	require.Equal(t, "replayed", d.body["status"])
	require.Equal(t, "ops", d.body["resolved_by"])
	again := s.do(http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", s.dlq, dlID), nil, s.bearer(s.opToken))
	require.Equal(t, 409, again.status, again.raw)
	require.Equal(t, 1, s.count(`SELECT count(*) FROM `+published.All+` o WHERE headers->>'replay_of' = $1`, fmt.Sprint(dlID)))

	// Replaying something that had in fact succeeded: a dead letter made
	// from the credit's own record. dlq-admin sees the credit is already in
	// the ledger: it publishes nothing and says so (outcome noop);
	// were it published, the ledger's unique reference would make it
	// change nothing.
	dupID := s.deadLetterOfCredit()
	credits := s.count(`SELECT count(*) FROM ledger_transactions`)
	dup := s.do(http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", s.dlq, dupID), nil, s.bearer(s.opToken))
	require.Equal(t, 202, dup.status, dup.raw)
	require.Equal(t, "noop", dup.body["outcome"], dup.raw)
	require.Equal(t, "CREDITED", dup.body["subject_state"], dup.raw)
	require.Nil(t, dup.body["outbox_id"], dup.raw)
	require.Equal(t, "replayed", dup.body["dead_letter"].(map[string]any)["status"])
	require.Zero(t, s.count(`SELECT count(*) FROM `+published.All+` o WHERE headers->>'replay_of' = $1`, fmt.Sprint(dupID)),
		"nothing was published")
	require.Equal(t, "republished", d.body["replay"].(map[string]any)["outcome"], "the NEEDS_REVIEW payout's replay was a real one")
	require.EqualValues(t, 3500, wallet(), "a replay of a credit that was applied changes no balance")
	require.Equal(t, credits, s.count(`SELECT count(*) FROM ledger_transactions`))

	// And the integrity check agrees.
	rec := s.do(http.MethodPost, s.dlq+"/v1/reconciliation", nil, s.bearer(s.opToken))
	require.Equal(t, 200, rec.status, rec.raw)
	require.Equal(t, true, rec.body["ok"], "the ledger is whole: %s", rec.raw)
	require.False(t, strings.Contains(rec.raw, "balance_mismatch"))
}
