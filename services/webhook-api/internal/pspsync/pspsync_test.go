package pspsync_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/payout"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/pspsync"
)

// TestMain fails the package's tests when a goroutine they started is
// still running after the last one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	stripeKey   = "sk_test_aegis_local_dev"
	paystackKey = "sk_test_paystack_local_dev"
)

type noNotify struct{}

func (noNotify) Notify()                     {}
func (noNotify) QueueNotify(*pgx.Batch) bool { return false }

type env struct {
	t      *testing.T
	db     *pgtest.DB
	psp    *psptest.StandIn
	store  *ingest.Store
	runs   *pspsync.Runs
	rec    *pspsync.Reconciler
	worker *pspsync.Worker
	// enq queues runs as dlq-admin does (an insert-only River client).
	enq *river.Client[pgx.Tx]
}

func newEnv(t *testing.T, cfg pspsync.Config) *env {
	t.Helper()
	e := newBareEnv(t, cfg)
	_, e.worker = e.startRunner(e.rec, pspsync.RunnerConfig{})
	return e
}

// newBareEnv is newEnv without a River client working the runs.
func newBareEnv(t *testing.T, cfg pspsync.Config) *env {
	t.Helper()
	// No webhook URLs: every event stays in the PSP's record only, as if
	// each webhook had been lost; the tests deliver some by hand.
	standIn := psptest.Start(t, map[string]string{"PSP_PAYSTACK_SECRET_KEY": paystackKey})
	db := pgtest.New(t)
	store := ingest.NewStore(db.Pool, noNotify{}, time.Now)
	runs := pspsync.NewRuns(db.Pool)
	sources := []pspsync.Source{
		pspsync.NewStripe(stripeapi.New(stripeKey, standIn.URL, nil)),
		pspsync.NewPaystack(paystackapi.New(paystackKey, standIn.URL, nil)),
	}
	rec := pspsync.NewReconciler(cfg, runs, store, sources, lifecycle.Deps{})
	enq, err := jobs.InsertOnly(db.Pool, quiet())
	require.NoError(t, err)
	return &env{t: t, db: db, psp: standIn, store: store, runs: runs, rec: rec, enq: enq}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startRunner starts a River client of webhook-api's (stopped when the
// test ends) that works the runs with rec.
func (e *env) startRunner(rec *pspsync.Reconciler, cfg pspsync.RunnerConfig) (*jobs.Runner, *pspsync.Worker) {
	e.t.Helper()
	if cfg.FetchPoll == 0 {
		cfg.FetchPoll = 20 * time.Millisecond
	}
	r, w, err := pspsync.NewRunner(e.db.Pool, e.runs, rec, cfg, lifecycle.Deps{Logger: quiet()})
	require.NoError(e.t, err)
	require.NoError(e.t, r.Start(context.Background()))
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(e.t, r.Stop(ctx))
	})
	return r, w
}

// request records a run and queues its River job in one transaction, as
// dlq-admin's POST /v1/psp-reconciliation does.
func (e *env) request(ctx context.Context) int64 {
	e.t.Helper()
	var id int64
	require.NoError(e.t, pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
		id = fixture.PSPRun{Trigger: "manual", RequestedBy: "test"}.Insert(e.t, tx)
		_, err := e.enq.InsertTx(ctx, tx, jobs.PSPReconcileArgs{RunID: id}, nil)
		return err
	}))
	return id
}

// finished waits until run id is finished and its River job completed.
func (e *env) finished(id int64) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		return e.count(`SELECT count(*) FROM psp_reconciliation_runs WHERE id = $1 AND finished_at IS NOT NULL`, id) == 1 &&
			e.count(`SELECT count(*) FROM river_job WHERE kind = 'psp_reconcile' AND (args->>'run_id')::bigint = $1
				AND state = 'completed'`, id) == 1
	}, 60*time.Second, 20*time.Millisecond, "run %d never finished", id)
}

// run is one run requested by an operator, worked to the end.
type run struct {
	ID                                         int64
	Status                                     string
	Found, Recovered, Present, DisagreementCnt int
	Disagreements                              []pspsync.Disagreement
	Report                                     map[string]pspsync.ProviderReport
	Error                                      *string
}

func (e *env) runOnce() run {
	e.t.Helper()
	id := e.request(context.Background())
	e.finished(id)
	return e.read(id)
}

func (e *env) read(id int64) run {
	e.t.Helper()
	var r run
	var dis, rep []byte
	require.NoError(e.t, e.db.Pool.QueryRow(context.Background(), `
		SELECT id, status, events_found, events_recovered, events_present, disagreement_count, disagreements, report, error
		FROM psp_reconciliation_runs WHERE id = $1`, id).
		Scan(&r.ID, &r.Status, &r.Found, &r.Recovered, &r.Present, &r.DisagreementCnt, &dis, &rep, &r.Error))
	require.NoError(e.t, json.Unmarshal(dis, &r.Disagreements))
	require.NoError(e.t, json.Unmarshal(rep, &r.Report))
	require.Equal(e.t, pspsync.StatusSucceeded, r.Status, "run error: %v, report %s", r.Error, rep)
	return r
}

func (e *env) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

// stripeEvents is the stand-in's own record (what a late webhook carries).
func (e *env) stripeEvents() map[string][]byte {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.psp.URL+"/v1/events?limit=100", nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+stripeKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&page))
	out := map[string][]byte{}
	for _, raw := range page.Data {
		var ev struct {
			Type string `json:"type"`
		}
		require.NoError(e.t, json.Unmarshal(raw, &ev))
		out[ev.Type] = raw
	}
	return out
}

// A payment and its refund whose webhooks never came are recovered by the
// job through the webhook path: stored once with one outbox row each (the
// worker's ledger keys make the credit and the refund post once); the next
// run finds them present and moves the cursor; their webhook arriving after
// all is a duplicate.
func TestDroppedWebhooksAreRecoveredOnceAndTheLateWebhookIsADuplicate(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Overlap: time.Minute, Grace: time.Hour})
	pay := e.psp.Pay(t, "stripe", "alice", 5000, "usd")
	e.psp.Refund(t, pay.ID, 1000, "succeeded")
	ps := e.psp.Pay(t, "paystack", "bola", 7000, "ngn")

	first := e.runOnce()
	require.Equal(t, 3, first.Found)
	require.Equal(t, 3, first.Recovered)
	require.Equal(t, 0, first.Present)
	require.Empty(t, first.Disagreements)
	require.True(t, first.Report["stripe"].CursorAdvance)

	require.Equal(t, 1, e.count(`SELECT count(*) FROM webhook_events WHERE provider = 'stripe' AND event_type = 'payment_intent.succeeded' AND object_id = $1`, pay.ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM webhook_events WHERE provider = 'stripe' AND event_type = 'refund.created' AND object_id = $1`, pay.ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM webhook_events WHERE provider = 'paystack' AND event_type = 'charge.success' AND object_id = $1 AND user_id = 'bola'`, ps.ID))
	require.Equal(t, 3, e.count(`SELECT count(*) FROM transaction_outbox o JOIN webhook_events w ON w.event_id = o.payload->>'event_id'`),
		"one outbox row per recovered event")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM transaction_outbox WHERE payload->>'action' = 'credit' AND payload->>'reference' = $1`, pay.ID))

	var cursor1 time.Time
	require.NoError(t, e.db.Pool.QueryRow(context.Background(),
		`SELECT synced_until FROM psp_reconciliation_cursors WHERE provider = 'stripe'`).Scan(&cursor1))

	second := e.runOnce()
	require.Equal(t, 3, second.Found, "the overlap reads them again")
	require.Equal(t, 0, second.Recovered)
	require.Equal(t, 3, second.Present)
	var cursor2 time.Time
	require.NoError(t, e.db.Pool.QueryRow(context.Background(),
		`SELECT synced_until FROM psp_reconciliation_cursors WHERE provider = 'stripe'`).Scan(&cursor2))
	require.True(t, cursor2.After(cursor1), "cursor advances: %v then %v", cursor1, cursor2)
	require.Equal(t, cursor1.Add(-time.Minute).UTC(), second.Report["stripe"].WindowFrom.UTC(), "the next window starts at the cursor minus the overlap")

	// The webhook comes after all, through the same normalise → store path.
	body := e.stripeEvents()["payment_intent.succeeded"]
	n, err := ingest.NormalizeStripe(body, time.Now())
	require.NoError(t, err)
	saved, err := e.store.Save(context.Background(), ingest.Pending{Event: n, Body: body, CorrelationID: "late-webhook"})
	require.NoError(t, err)
	require.Equal(t, ingest.Duplicate, saved.Outcome)
	require.Equal(t, 3, e.count(`SELECT count(*) FROM transaction_outbox`), "nothing new published")
}

// A webhook that came first makes the job count the event present and store
// nothing.
func TestEventWhoseWebhookCameIsPresent(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	e.psp.Pay(t, "stripe", "carol", 1200, "usd")
	body := e.stripeEvents()["payment_intent.succeeded"]
	n, err := ingest.NormalizeStripe(body, time.Now())
	require.NoError(t, err)
	saved, err := e.store.Save(context.Background(), ingest.Pending{Event: n, Body: body, CorrelationID: "webhook"})
	require.NoError(t, err)
	require.Equal(t, ingest.Accepted, saved.Outcome)

	r := e.runOnce()
	require.Equal(t, 1, r.Found)
	require.Equal(t, 0, r.Recovered)
	require.Equal(t, 1, r.Present)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM transaction_outbox`))
}

func insertPayout(t *testing.T, db *pgtest.DB, id, status, provider string) {
	t.Helper()
	insertPayoutTo(t, db, id, status, provider, "acct_dave")
}

func insertPayoutTo(t *testing.T, db *pgtest.DB, id, status, provider, destination string) {
	t.Helper()
	fixture.Payout{ID: id, UserID: "dave", Destination: destination, Provider: provider, Status: payoutstate.Status(status)}.Insert(t, db.Pool)
}

// A payout paid at the PSP and FAILED here (its hold given back: the money
// left twice) is a disagreement, stored with the run; so is a refund stored
// past the grace that the ledger never posted. A platform payout to a bare
// bank account, accepted before migration 000039 and paid, agrees.
func TestRunReportsDisagreementsBetweenPSPAndLedger(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Grace: 0})
	failedHere := uuid.NewString()
	insertPayout(t, e.db, failedHere, "FAILED", "stripe")
	agreed := uuid.NewString()
	insertPayout(t, e.db, agreed, "SUCCEEDED", "stripe")
	legacy := uuid.NewString()
	insertPayoutTo(t, e.db, legacy, "SUCCEEDED", "stripe", "ba_dave")

	for _, id := range []string{failedHere, agreed} {
		tr := stripeTransferAt(t, e, id, id, 1500, "usd", "acct_dave")
		_, err := e.db.Pool.Exec(context.Background(), `UPDATE payouts SET psp_reference = $2 WHERE id = $1`, id, tr)
		require.NoError(t, err)
	}
	po := stripePayoutAt(t, e, legacy, legacy, 1500, "usd", "ba_dave")
	_, err := e.db.Pool.Exec(context.Background(), `UPDATE payouts SET psp_reference = $2 WHERE id = $1`, legacy, po)
	require.NoError(t, err)
	pay := e.psp.Pay(t, "stripe", "erin", 3000, "usd")
	refund := e.psp.Refund(t, pay.ID, 500, "succeeded")

	e.runOnce() // recovers the payment and the refund; grace 0: the refund is judged on the next run
	r := e.runOnce()
	kinds := map[string]pspsync.Disagreement{}
	for _, d := range r.Disagreements {
		kinds[d.Kind] = d
	}
	require.Len(t, r.Disagreements, 2, "%+v", r.Disagreements)
	require.Equal(t, 2, r.DisagreementCnt)
	paid := kinds[pspsync.PaidNotSucceeded]
	require.Equal(t, failedHere, paid.PayoutID)
	require.Equal(t, "paid", paid.PSPStatus)
	require.Equal(t, "FAILED", paid.LedgerStatus)
	require.Equal(t, refund.ID, kinds[pspsync.ReturnNotPosted].PSPObjectID)

	// Once the ledger posts the refund, it is no longer a disagreement.
	_, err = e.db.Pool.Exec(context.Background(), `
		INSERT INTO payment_returns (provider, object_id, kind, payment_reference, user_id, currency, amount, state, last_event_id)
		VALUES ('stripe', $1, 'refund', $2, 'erin', 'usd', 500, 'refunded', 'evt')`, refund.ID, pay.ID)
	require.NoError(t, err)
	r = e.runOnce()
	require.Len(t, r.Disagreements, 1)
	require.Equal(t, pspsync.PaidNotSucceeded, r.Disagreements[0].Kind)
}

// One run is active at a time: a second active record is refused (the
// API's 409), and the schedule requests none while one is active.
func TestOneActiveRunAndTheScheduleWaitsForIt(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `INSERT INTO psp_reconciliation_runs (trigger) VALUES ('manual')`)
	require.NoError(t, err)
	_, err = e.db.Pool.Exec(ctx, `INSERT INTO psp_reconciliation_runs (trigger) VALUES ('manual')`)
	require.Error(t, err, "a second active run is refused")
	_, ok, err := e.runs.RequestScheduled(ctx, e.enq)
	require.NoError(t, err)
	require.False(t, ok)
	require.Zero(t, e.count(`SELECT count(*) FROM river_job`), "nothing queued for it")
}

// Paystack has no events API: a decided transfer in GET /transfer stands for
// its webhook, recovered under the webhook's own identity
// (transfer.success:<id>), so the webhook arriving later is a duplicate.
func TestPaystackTransferOutcomeIsRecoveredUnderTheWebhooksIdentity(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	id := uuid.NewString()
	insertPayout(t, e.db, id, "AWAITING_RESPONSE", "paystack")
	_, err := e.db.Pool.Exec(context.Background(), `UPDATE payouts SET currency = 'ngn', destination = 'RCP_ok' WHERE id = $1`, id)
	require.NoError(t, err)
	body := `{"source":"balance","amount":1500,"currency":"NGN","recipient":"RCP_ok","reference":"` + id + `"}`
	req, err := http.NewRequest(http.MethodPost, e.psp.URL+"/transfer", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+paystackKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var created struct {
		Data struct {
			TransferCode string `json:"transfer_code"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
	resp.Body.Close()
	e.psp.Settle(t, created.Data.TransferCode, "paid")

	r := e.runOnce()
	require.Equal(t, 1, r.Recovered, "%+v", r.Report["paystack"])
	require.Empty(t, r.Disagreements, "AWAITING_RESPONSE within the grace: its outcome is on its way")
	var eventID, payoutID string
	require.NoError(t, e.db.Pool.QueryRow(context.Background(),
		`SELECT w.event_id, o.payload->>'payout_id' FROM webhook_events w JOIN transaction_outbox o ON o.payload->>'event_id' = w.event_id
		 WHERE w.provider = 'paystack' AND w.event_type = 'transfer.success'`).Scan(&eventID, &payoutID))
	require.Equal(t, id, payoutID)

	// The webhook as Paystack would send it: the same identity, a duplicate.
	webhook := []byte(`{"event":"transfer.success","data":{"id":` + strings.TrimPrefix(eventID, "transfer.success:") +
		`,"reference":"` + id + `","transfer_code":"` + created.Data.TransferCode + `","status":"success","amount":1500,"currency":"NGN"}}`)
	n, err := ingest.NormalizePaystack(webhook, time.Now())
	require.NoError(t, err)
	require.Equal(t, eventID, n.Event.EventID)
	saved, err := e.store.Save(context.Background(), ingest.Pending{Event: n, Body: webhook, CorrelationID: "late"})
	require.NoError(t, err)
	require.Equal(t, ingest.Duplicate, saved.Outcome)
}

// Paystack's refunds and disputes have no events API either: a refund in
// GET /refund and a dispute in GET /dispute stand for the refund.processed
// and charge.dispute.create|resolve webhooks that were lost, recovered under
// the webhooks' own identities (so the late webhook is a duplicate) and
// carrying the ledger's keys (the refund reference, the dispute id).
func TestPaystackRefundAndDisputeAreRecoveredUnderTheWebhooksIdentity(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Overlap: time.Minute, Grace: time.Hour})
	pay := e.psp.Pay(t, "paystack", "funmi", 9000, "ngn")
	refund := e.psp.Refund(t, pay.ID, 2000, "succeeded")
	dispute := e.psp.Dispute(t, pay.ID, 3000, "")
	e.psp.CloseDispute(t, dispute.ID, "lost")

	first := e.runOnce()
	pr := first.Report["paystack"]
	require.Equal(t, 4, pr.Recovered, "charge, refund, dispute created and resolved: %+v", pr)
	require.Empty(t, pr.Errors)
	type outboxRow struct {
		EventID, Type, Reference string
		Returns                  []struct {
			ID       string `json:"id"`
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
			Outcome  string `json:"outcome"`
		}
	}
	rows, err := e.db.Pool.Query(context.Background(), `
		SELECT w.event_id, w.event_type, o.payload->>'reference', coalesce(o.payload->'returns', '[]')
		FROM webhook_events w JOIN transaction_outbox o ON o.payload->>'event_id' = w.event_id
		WHERE w.provider = 'paystack' AND w.event_type <> 'charge.success' ORDER BY w.id`)
	require.NoError(t, err)
	var got []outboxRow
	for rows.Next() {
		var r outboxRow
		var returns []byte
		require.NoError(t, rows.Scan(&r.EventID, &r.Type, &r.Reference, &returns))
		require.NoError(t, json.Unmarshal(returns, &r.Returns))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 3, "%+v", got)
	byType := map[string]outboxRow{}
	for _, r := range got {
		byType[r.Type] = r
		require.Equal(t, pay.ID, r.Reference, "the payment the ledger takes it back from")
		require.Len(t, r.Returns, 1)
	}
	require.Equal(t, "refund.processed:"+refund.ID, byType["refund.processed"].EventID)
	require.Equal(t, refund.ID, byType["refund.processed"].Returns[0].ID)
	require.Equal(t, int64(2000), byType["refund.processed"].Returns[0].Amount)
	require.Equal(t, "ngn", byType["refund.processed"].Returns[0].Currency)
	require.Equal(t, "charge.dispute.create:"+dispute.ID, byType["charge.dispute.create"].EventID)
	require.Equal(t, dispute.ID, byType["charge.dispute.resolve"].Returns[0].ID)
	require.Equal(t, int64(3000), byType["charge.dispute.resolve"].Returns[0].Amount)
	require.Equal(t, "lost", byType["charge.dispute.resolve"].Returns[0].Outcome)
	order := map[string]int{}
	for i, r := range got {
		order[r.Type] = i
	}
	require.Less(t, order["charge.dispute.create"], order["charge.dispute.resolve"], "stored oldest first, as the webhooks would have come")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM webhook_events w WHERE provider = 'paystack' AND event_type = 'charge.success'
		AND w.id < (SELECT min(id) FROM webhook_events WHERE provider = 'paystack' AND event_type <> 'charge.success')`),
		"the payment's credit is stored before the money that goes back")

	second := e.runOnce()
	require.Equal(t, 0, second.Report["paystack"].Recovered, "stored once")
	require.Equal(t, 4, second.Report["paystack"].Present)

	// The webhooks as the stand-in sends them come late: duplicates.
	for _, body := range []string{
		`{"event":"refund.processed","data":{"id":"` + refund.ID + `","refund_reference":"` + refund.ID + `","transaction_reference":"` + pay.ID + `","amount":"2000","currency":"NGN","status":"processed"}}`,
		`{"event":"charge.dispute.create","data":{"id":"` + dispute.ID + `","refund_amount":3000,"currency":"NGN","status":"awaiting-merchant-feedback","transaction":{"reference":"` + pay.ID + `","amount":9000,"currency":"NGN"}}}`,
		`{"event":"charge.dispute.resolve","data":{"id":"` + dispute.ID + `","refund_amount":3000,"currency":"NGN","status":"resolved","resolution":"merchant-accepted","transaction":{"reference":"` + pay.ID + `","amount":9000,"currency":"NGN"}}}`,
	} {
		n, err := ingest.NormalizePaystack([]byte(body), time.Now())
		require.NoError(t, err)
		saved, err := e.store.Save(context.Background(), ingest.Pending{Event: n, Body: []byte(body), CorrelationID: "late"})
		require.NoError(t, err)
		require.Equal(t, ingest.Duplicate, saved.Outcome, n.Event.EventID)
	}
	require.Equal(t, 4, e.count(`SELECT count(*) FROM transaction_outbox o JOIN webhook_events w ON w.event_id = o.payload->>'event_id' WHERE w.provider = 'paystack'`))
}

// A disagreement that persists is one row across runs: new on the run
// that first found it (the one dlq-admin pages for), still open on the
// next, cleared by the first run that no longer finds it; the open gauge
// follows it.
func TestAPersistingDisagreementIsNewOnceThenStillOpenThenCleared(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	w := e.worker

	failedHere := uuid.NewString()
	insertPayout(t, e.db, failedHere, "FAILED", "stripe")
	stripeTransferAt(t, e, failedHere, failedHere, 1500, "usd", "acct_dave")

	counts := func(id int64) [3]int {
		var c [3]int
		require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT disagreements_new, disagreements_open, disagreements_cleared
			FROM psp_reconciliation_runs WHERE id = $1`, id).Scan(&c[0], &c[1], &c[2]))
		return c
	}
	open := func() float64 { return openDisagreements(t, w, "stripe", pspsync.PaidNotSucceeded) }

	first := e.runOnce()
	require.Len(t, first.Disagreements, 1)
	require.Equal(t, pspsync.StateNew, first.Disagreements[0].State)
	require.NotNil(t, first.Disagreements[0].FirstSeenAt)
	require.Equal(t, [3]int{1, 0, 0}, counts(first.ID))
	require.Equal(t, float64(1), open())
	// Another replica, which worked no run, exports the same figure from
	// the database (the rule takes max over replicas: AegisPSPDisagreementOpen).
	replica, err := pspsync.NewWorker(e.runs, e.rec, make(chan struct{}), lifecycle.Deps{Logger: quiet()})
	require.NoError(t, err)
	replicaOpen := func() float64 { return openDisagreements(t, replica, "stripe", pspsync.PaidNotSucceeded) }
	require.Equal(t, float64(1), replicaOpen())

	second := e.runOnce()
	require.Len(t, second.Disagreements, 1)
	require.Equal(t, pspsync.StateStillOpen, second.Disagreements[0].State)
	require.True(t, first.Disagreements[0].FirstSeenAt.Equal(*second.Disagreements[0].FirstSeenAt), "first seen stays")
	require.Equal(t, [3]int{0, 1, 0}, counts(second.ID), "not new: no second page")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM psp_disagreements WHERE payout_id = $1 AND cleared_at IS NULL
		AND first_seen_run = $2 AND last_seen_run = $3`, failedHere, first.ID, second.ID))

	// A person puts it right: the next run no longer finds it and clears it.
	_, err = e.db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'SUCCEEDED' WHERE id = $1`, failedHere)
	require.NoError(t, err)
	third := e.runOnce()
	require.Empty(t, third.Disagreements)
	require.Equal(t, [3]int{0, 0, 1}, counts(third.ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM psp_disagreements WHERE payout_id = $1 AND cleared_run = $2`, failedHere, third.ID))
	require.Zero(t, e.count(`SELECT count(*) FROM psp_disagreements WHERE cleared_at IS NULL`))
	require.Equal(t, float64(0), open())
	require.Equal(t, float64(0), replicaOpen(), "the other replica's figure resolves too (no stale 1 for max to keep)")

	// Found again later, it is new again (a fresh row).
	_, err = e.db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'FAILED' WHERE id = $1`, failedHere)
	require.NoError(t, err)
	fourth := e.runOnce()
	require.Equal(t, [3]int{1, 0, 0}, counts(fourth.ID))
	require.Equal(t, 2, e.count(`SELECT count(*) FROM psp_disagreements WHERE payout_id = $1`, failedHere))
}

// stripeTransferAt creates a Stripe transfer to a connected account at the
// stand-in for our payout id under key (paid once created), and returns
// its id.
func stripeTransferAt(t *testing.T, e *env, payoutID, key string, amount int64, currency, destination string) string {
	t.Helper()
	tr, err := stripeapi.New(stripeKey, e.psp.URL, nil).CreateTransfer(context.Background(), stripeapi.TransferRequest{
		Money: stripeapi.Money{Amount: amount, Currency: currency}, Destination: destination, TransferGroup: payoutID,
		Metadata: map[string]string{"payout_id": payoutID}, IdempotencyKey: key})
	require.NoError(t, err)
	return tr.ID
}

// stripePayoutAt creates a Stripe payout from the platform's balance at the
// stand-in for our payout id under key, settles it paid, and returns its
// id: how a payout to a bare bank account accepted before migration 000039
// is sent.
func stripePayoutAt(t *testing.T, e *env, payoutID, key string, amount int64, currency, destination string) string {
	t.Helper()
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{URL: stripe.String(e.psp.URL),
		MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}})
	pc := payout.Client{B: b, Key: stripeKey}
	params := &stripe.PayoutParams{Amount: stripe.Int64(amount), Currency: stripe.String(currency), Destination: stripe.String(destination)}
	params.AddMetadata("payout_id", payoutID)
	params.SetIdempotencyKey(key)
	po, err := pc.New(params)
	require.NoError(t, err)
	e.psp.Settle(t, po.ID, "paid")
	return po.ID
}

// The reconciliation compares money, not only status. Each of these
// payouts is SUCCEEDED here and paid at the PSP, so status alone agrees;
// each disagrees on one thing, and each is flagged with its own kind:
// two paid objects for one payout (a double payment, with both ids), a
// different amount, currency or destination (Stripe, and a Paystack
// transfer to another recipient), and a live object that is not the one
// recorded here. The payout that agrees in everything is not flagged.
func TestRunFlagsEveryMoneyDisagreement(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Grace: 0})
	ctx := context.Background()
	payouts := map[string]string{}
	for _, name := range []string{"double", "amount", "currency", "destination", "object", "agreed", "paystack"} {
		payouts[name] = uuid.NewString()
		provider := "stripe"
		if name == "paystack" {
			provider = "paystack"
		}
		insertPayout(t, e.db, payouts[name], "SUCCEEDED", provider) // 1500 usd to acct_dave
	}
	reference := func(name, pspID string) {
		_, err := e.db.Pool.Exec(ctx, `UPDATE payouts SET psp_reference = $2 WHERE id = $1`, payouts[name], pspID)
		require.NoError(t, err)
	}
	first := stripeTransferAt(t, e, payouts["double"], "double-1", 1500, "usd", "acct_dave")
	second := stripeTransferAt(t, e, payouts["double"], "double-2", 1500, "usd", "acct_dave")
	reference("double", first)
	reference("amount", stripeTransferAt(t, e, payouts["amount"], "amount", 1600, "usd", "acct_dave"))
	reference("currency", stripeTransferAt(t, e, payouts["currency"], "currency", 1500, "eur", "acct_dave"))
	reference("destination", stripeTransferAt(t, e, payouts["destination"], "destination", 1500, "usd", "acct_mallory"))
	stripeTransferAt(t, e, payouts["object"], "object", 1500, "usd", "acct_dave")
	reference("object", "tr_recorded_elsewhere")
	reference("agreed", stripeTransferAt(t, e, payouts["agreed"], "agreed", 1500, "usd", "acct_dave"))
	_, err := e.db.Pool.Exec(ctx, `UPDATE payouts SET currency = 'ngn', destination = 'RCP_dave' WHERE id = $1`, payouts["paystack"])
	require.NoError(t, err)
	code := paystackTransferAt(t, e, payouts["paystack"], 1500, "RCP_mallory")
	e.psp.Settle(t, code, "paid")
	reference("paystack", code)

	r := e.runOnce()
	got := map[string][]pspsync.Disagreement{}
	for _, d := range r.Disagreements {
		got[d.PayoutID] = append(got[d.PayoutID], d)
	}
	only := func(name, kind string) pspsync.Disagreement {
		t.Helper()
		require.Len(t, got[payouts[name]], 1, "%s: %+v", name, got[payouts[name]])
		d := got[payouts[name]][0]
		require.Equal(t, kind, d.Kind, "%s: %+v", name, d)
		require.Equal(t, "SUCCEEDED", d.LedgerStatus)
		return d
	}
	double := only("double", pspsync.DoublePayment)
	require.ElementsMatch(t, []string{first, second}, double.PSPObjectIDs, "both objects are named")
	require.Contains(t, double.Detail, first)
	require.Contains(t, double.Detail, second)
	require.Equal(t, pspsync.DoublePayment, r.Disagreements[0].Kind, "a double payment is listed first")
	require.Contains(t, only("amount", pspsync.AmountMismatch).Detail, "1600")
	require.Contains(t, only("currency", pspsync.CurrencyMismatch).Detail, "eur")
	require.Contains(t, only("destination", pspsync.DestinationMismatch).Detail, "acct_mallory")
	require.Contains(t, only("object", pspsync.ObjectMismatch).Detail, "tr_recorded_elsewhere")
	ps := only("paystack", pspsync.DestinationMismatch)
	require.Equal(t, "paystack", ps.Provider)
	require.Equal(t, code, ps.PSPObjectID)
	require.Empty(t, got[payouts["agreed"]], "the payout that agrees is not flagged")
	require.Len(t, r.Disagreements, 6)

	// Stored where the run's disagreements are, each new (dlq-admin pages).
	for _, kind := range []string{pspsync.DoublePayment, pspsync.AmountMismatch, pspsync.CurrencyMismatch,
		pspsync.DestinationMismatch, pspsync.ObjectMismatch} {
		require.GreaterOrEqual(t, e.count(`SELECT count(*) FROM psp_disagreements WHERE kind = $1 AND cleared_at IS NULL`, kind), 1, kind)
	}
	require.Equal(t, 6, e.count(`SELECT disagreements_new FROM psp_reconciliation_runs WHERE id = $1`, r.ID))
}

// paystackTransferAt initiates a Paystack transfer at the stand-in for our
// payout id (its reference) and returns its transfer code.
func paystackTransferAt(t *testing.T, e *env, payoutID string, amount int64, recipient string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"source": "balance", "amount": amount, "recipient": recipient,
		"reference": payoutID, "reason": "test", "currency": "NGN"})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, e.psp.URL+"/transfer", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+paystackKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Status bool `json:"status"`
		Data   struct {
			TransferCode string `json:"transfer_code"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.True(t, out.Status)
	require.NotEmpty(t, out.Data.TransferCode)
	return out.Data.TransferCode
}

// openDisagreements reads w's aegis_psp_disagreements_open{provider, kind}
// as a scrape would (-1 when it has no such series).
func openDisagreements(t *testing.T, w *pspsync.Worker, provider, kind string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(w.OpenGauge()))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["kind"] == kind {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
