package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/alertlog"
	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// weekDB is a migrated database with the wallets the planted records use.
type weekDB struct {
	t                     *testing.T
	pool                  *pgxpool.Pool
	user, holds, clearing int64
}

func newWeekDB(t *testing.T) *weekDB {
	db := pgtest.New(t)
	w := &weekDB{t: t, pool: db.Pool}
	if err := published.Keep(context.Background(), db.Pool); err != nil {
		t.Fatal(err)
	}
	w.user, w.holds, w.clearing = w.wallet("user", "chaos-week"), w.wallet("system", "payout_holds"), w.wallet("system", "psp_clearing:stripe")
	return w
}

func (w *weekDB) wallet(kind, owner string) int64 {
	var id int64
	if err := w.pool.QueryRow(context.Background(), `INSERT INTO wallets (kind, owner, currency) VALUES ($1, $2, 'usd') RETURNING id`,
		kind, owner).Scan(&id); err != nil {
		w.t.Fatal(err)
	}
	return id
}

// payout plants a held payout in status.
func (w *weekDB) payout(status string) string {
	id := uuid.NewString()
	if _, err := w.pool.Exec(context.Background(), `INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency,
		destination, provider, status) VALUES ($1::uuid, 'chaos', $1::text, 'h', 'chaos-week', 500, 'usd', 'acct_x', 'stripe', $2)`, id, status); err != nil {
		w.t.Fatal(err)
	}
	ledgerTx(w.t, w.pool, "payout_hold", id, w.user, w.holds, 500)
	return id
}

func (w *weekDB) settle(id string) {
	ledgerTx(w.t, w.pool, "payout_settle", id, w.holds, w.clearing, 500)
}
func (w *weekDB) release(id string) {
	ledgerTx(w.t, w.pool, "payout_release", id, w.holds, w.user, 500)
}

// pspServer serves objs as the stand-in's GET /_psp/objects and returns
// its port.
func pspServer(t *testing.T, objs []pspObject) int {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"items": objs})
	}))
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	n, _ := strconv.Atoi(port)
	return n
}

// Invariant 2 names a payout paid twice with both PSP objects.
func TestCheckPSPNamesBothObjectsOfAPayoutPaidTwice(t *testing.T) {
	db := newWeekDB(t)
	twice, once := db.payout("SUCCEEDED"), db.payout("SUCCEEDED")
	db.settle(twice)
	db.settle(once)
	objs := []pspObject{
		{Provider: "stripe", ID: "po_first", PayoutID: twice, Amount: 500, Currency: "usd", Status: "paid", IdempotencyKey: "k1"},
		{Provider: "stripe", ID: "po_second", PayoutID: twice, Amount: 500, Currency: "usd", Status: "pending", IdempotencyKey: "k1"},
		{Provider: "stripe", ID: "po_once", PayoutID: once, Amount: 500, Currency: "usd", Status: "paid"},
		{Provider: "stripe", ID: "po_failed", PayoutID: once, Amount: 500, Currency: "usd", Status: "failed"},
	}
	su := &suite{pool: db.pool, ports: stackPorts(pspServer(t, objs))}
	rep := &Report{}
	if err := su.checkPSP(context.Background(), &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 1 || !strings.Contains(got, "payout "+twice+" paid twice") ||
		!strings.Contains(got, "po_first (paid") || !strings.Contains(got, "po_second (pending") || strings.Contains(got, once) {
		t.Fatalf("violations:\n%s\nwant payout %s paid twice with po_first and po_second named", got, twice)
	}
}

// Invariant 13 fails for a payout whose hold was given back while the PSP
// paid it (or still may), and passes for one the PSP failed.
func TestCheckGivenBackFailsForAHoldReleasedWhileThePSPPaid(t *testing.T) {
	db := newWeekDB(t)
	paidBack, pendingBack, failedBack := db.payout("FINALIZED"), db.payout("FINALIZED"), db.payout("FINALIZED")
	for _, id := range []string{paidBack, pendingBack, failedBack} {
		db.release(id)
	}
	objs := []pspObject{
		{Provider: "stripe", ID: "po_paid", PayoutID: paidBack, Amount: 500, Currency: "usd", Status: "paid"},
		{Provider: "paystack", ID: "TRF_otp", PayoutID: pendingBack, Amount: 500, Currency: "NGN", Status: "otp"},
		{Provider: "stripe", ID: "po_failed", PayoutID: failedBack, Amount: 500, Currency: "usd", Status: "failed"},
	}
	su := &suite{pool: db.pool}
	rep := &Report{}
	if err := su.judgeGivenBack(context.Background(), objs, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 2 || !strings.Contains(got, "payout "+paidBack+" (FINALIZED): its hold was given back while the PSP holds stripe po_paid (paid") ||
		!strings.Contains(got, "TRF_otp (otp") || strings.Contains(got, failedBack) {
		t.Fatalf("violations:\n%s\nwant %s (po_paid) and %s (TRF_otp), not %s", got, paidBack, pendingBack, failedBack)
	}

	rep = &Report{}
	if err := su.judgeGivenBack(context.Background(), objs[2:], rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 0 || len(rep.Checks) != 1 {
		t.Fatalf("violations %v; want invariant 13 to pass with the PSP's failed object only", rep.Violations)
	}
}

// Invariant 14 fails for a hold both settled and released, a finished
// payout's hold never ended, and an unfinished payout's hold ended.
func TestCheckHoldsOnceNamesEveryHoldNotEndedExactlyOnce(t *testing.T) {
	db := newWeekDB(t)
	good, goodFailed := db.payout("SUCCEEDED"), db.payout("FINALIZED")
	db.settle(good)
	db.release(goodFailed)
	twice := db.payout("FINALIZED")
	db.settle(twice)
	db.release(twice)
	never := db.payout("SUCCEEDED")
	early := db.payout("SENDING_TO_GATEWAY")
	db.release(early)

	su := &suite{pool: db.pool}
	rep := &Report{}
	if err := su.checkHoldsOnce(context.Background(), &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	for _, want := range []string{
		"payout " + twice + " (FINALIZED): its hold was settled 1 and released 1 times",
		"payout " + never + " (SUCCEEDED): its hold was settled 0 and released 0 times",
		"payout " + early + " (SENDING_TO_GATEWAY) is unfinished but its hold was settled 0 and released 1 times",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("violations:\n%s\nwant %q", got, want)
		}
	}
	if len(rep.Violations) != 3 || strings.Contains(got, good) || strings.Contains(got, goodFailed) {
		t.Fatalf("violations:\n%s\nwant exactly the three planted defects", got)
	}
}

// overdue holds each state to its deadline at the profile's scale.
func TestOverdueHoldsEachStateToItsDeadlineAtScale(t *testing.T) {
	p, _ := ProfileNamed("week")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spans := []stateSpan{
		{Payout: "a", State: "SENDING_TO_GATEWAY", From: t0, Until: t0.Add(p.Sim(25 * time.Hour))},
		{Payout: "b", State: "SENDING_TO_GATEWAY", From: t0, Until: t0.Add(p.Sim(2 * time.Hour))},
		{Payout: "c", State: "AWAITING_RESPONSE", From: t0, Until: t0.Add(p.Sim(2 * simDay))},
		{Payout: "d", State: "AWAITING_RESPONSE", From: t0, Until: t0.Add(p.Sim(4 * simDay))},
		{Payout: "e", State: "SUCCEEDED", From: t0, Until: t0.Add(p.Sim(30 * simDay))},
	}
	late, at := overdue(spans, Deadlines(), p, nil, 0)
	if len(late) != 2 || late[0].Payout != "a" || late[1].Payout != "d" {
		t.Fatalf("overdue %+v, want a (SENDING past 23 h) and d (AWAITING past 3 days)", late)
	}
	if !at[0].Equal(t0.Add(p.Sim(23 * time.Hour))) {
		t.Fatalf("a overdue at %s, want 23 simulated hours in", at[0])
	}
	// Time when no worker ran does not count: a's 25 hours less 3 down.
	down := [][2]time.Time{{t0.Add(p.Sim(time.Hour)), t0.Add(p.Sim(4 * time.Hour))}}
	if late, _ := overdue(spans[:1], Deadlines(), p, down, 0); len(late) != 0 {
		t.Fatalf("overdue %+v; want a excused the 3 hours no worker ran", late)
	}
	// A stay that ends within the grace after its deadline was answered.
	if late, _ := overdue(spans[:1], Deadlines(), p, nil, p.Sim(3*time.Hour)); len(late) != 0 {
		t.Fatalf("overdue %+v; want a (2 hours past) inside a 3-hour grace", late)
	}
	if g := deadlineGrace(p); g != 3*time.Second {
		t.Fatalf("grace %s, want two sweeps (500ms) and a reconciliation (2s)", g)
	}
}

// Invariant 15 fails for a payout that outlived its deadline with neither
// an alert naming it nor a lookup, and passes once an alert names it.
func TestCheckDeadlinesFailsForAnOverduePayoutWithoutAnAlert(t *testing.T) {
	db := newWeekDB(t)
	ctx := context.Background()
	stuck := db.payout("SENDING_TO_GATEWAY")
	fine := db.payout("SUCCEEDED")
	p, _ := ProfileNamed("week")
	now := time.Now()
	for _, tr := range []struct {
		id, from, to string
		at           time.Time
	}{
		{stuck, "", "INITIALIZED", now.Add(-p.Sim(30 * time.Hour))},
		{stuck, "INITIALIZED", "SENDING_TO_GATEWAY", now.Add(-p.Sim(29 * time.Hour))},
		{fine, "", "INITIALIZED", now.Add(-p.Sim(3 * time.Hour))},
		{fine, "INITIALIZED", "SUCCEEDED", now.Add(-p.Sim(2 * time.Hour))},
	} {
		if _, err := db.pool.Exec(ctx, `INSERT INTO payout_transitions (payout_id, from_status, to_status, at)
			VALUES ($1, nullif($2, ''), $3, $4)`, tr.id, tr.from, tr.to, tr.at); err != nil {
			t.Fatal(err)
		}
	}
	k, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.close)
	su := &suite{pool: db.pool, sink: k, alerts: alertlog.NewRecorder(io.Discard), cfg: Config{Profile: p}}
	rep := &Report{Week: &WeekFigures{}}
	if err := su.checkDeadlines(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 1 || !strings.Contains(got, stuck+" SENDING_TO_GATEWAY for 29h") || strings.Contains(got, fine) ||
		rep.Week.DeadlinesHit != 1 {
		t.Fatalf("violations:\n%s\ndeadlines hit %d; want %s named, SENDING for 29 simulated hours", got, rep.Week.DeadlinesHit, stuck)
	}

	logAlert(t, su.alerts, "dead_letter:aegis.transactions:payout_deadline", stuck)
	rep = &Report{Week: &WeekFigures{}}
	if err := su.checkDeadlines(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 0 || len(rep.Checks) != 1 {
		t.Fatalf("violations %v; want invariant 15 to pass once an alert names %s", rep.Violations, stuck)
	}
}

// Invariant 16 fails for a forged event that moved money and names it.
func TestCheckForgedFailsForAForgedEventThatMovedMoney(t *testing.T) {
	db := newWeekDB(t)
	revenue := db.wallet("system", "psp_clearing:stripe-in")
	ledgerTx(t, db.pool, "credit", "stripe:pi_forged_kafka_forged_credit_7", revenue, db.user, 1000)
	wl := &workload{forged: []forgedEvent{
		{Kind: forgedKafka, EventID: "evt_forged_kafka_forged_credit_7", Payment: "pi_forged_kafka_forged_credit_7", User: "chaos-week", Amount: 1000},
		{Kind: forgedLivemode, EventID: "evt_forged_livemode_mismatch_7", Payment: "pi_forged_livemode_mismatch_7", User: "chaos-week", Amount: 1000, Status: 200},
	}}
	su := &suite{pool: db.pool}
	rep := &Report{Week: &WeekFigures{}}
	if err := su.checkForged(context.Background(), wl, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 1 || !strings.Contains(got, "forged kafka_forged_credit event evt_forged_kafka_forged_credit_7") ||
		!strings.Contains(got, "credit ") || rep.Week.Forged != 2 {
		t.Fatalf("violations:\n%s\nwant the Kafka forgery named with its ledger transaction", got)
	}
}

// callFigures counts lookups and the creates the PSP refused to repeat.
func TestCallFiguresCountsLookupsAndRefusedRepeats(t *testing.T) {
	calls := []psp.CallRecord{
		{Method: http.MethodGet, Path: "/v1/payouts/po_1"},
		{Method: http.MethodGet, Path: "/transfer/verify/ref"},
		{Method: http.MethodGet, Path: "/v1/events"},
		{Method: http.MethodPost, Path: "/v1/payouts", PayoutID: "p", Outcome: psp.OutcomeReplayed},
		{Method: http.MethodPost, Path: "/v1/payouts", PayoutID: "p", Outcome: psp.OutcomeConflict},
		{Method: http.MethodPost, Path: "/v1/payouts", PayoutID: "p", Outcome: psp.OutcomeCreated},
	}
	if l, r := callFigures(calls); l != 2 || r != 2 {
		t.Fatalf("lookups %d, refused %d; want 2 and 2", l, r)
	}
}

func stackPorts(pspPort int) stack.Ports { return stack.Ports{PSP: pspPort} }

// A lookup of the overdue payout at the PSP answers its deadline too; one
// made before it was overdue does not.
func TestCheckDeadlinesAcceptsALookupAfterTheDeadline(t *testing.T) {
	db := newWeekDB(t)
	ctx := context.Background()
	p, _ := ProfileNamed("week")
	now := time.Now()
	looked, early := db.payout("AWAITING_RESPONSE"), db.payout("AWAITING_RESPONSE")
	for _, id := range []string{looked, early} {
		if _, err := db.pool.Exec(ctx, `INSERT INTO payout_transitions (payout_id, to_status, at) VALUES ($1, 'AWAITING_RESPONSE', $2)`,
			id, now.Add(-p.Sim(4*simDay))); err != nil {
			t.Fatal(err)
		}
	}
	calls := []psp.CallRecord{
		{Method: http.MethodGet, Path: "/v1/payouts/po_1", PayoutID: looked, Time: now.Add(-p.Sim(12 * time.Hour))},
		{Method: http.MethodGet, Path: "/v1/payouts/po_2", PayoutID: early, Time: now.Add(-p.Sim(3*simDay + 12*time.Hour))},
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(psp.CallsView{Items: calls})
	}))
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	n, _ := strconv.Atoi(port)
	su := &suite{pool: db.pool, ports: stackPorts(n), cfg: Config{Profile: p}}
	rep := &Report{Week: &WeekFigures{}}
	if err := su.checkDeadlines(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 1 || !strings.Contains(got, early) || strings.Contains(got, looked) || rep.Week.DeadlinesHit != 2 {
		t.Fatalf("violations:\n%s\nwant only %s (looked up before its deadline) named", got, early)
	}
}

// Invariant 17 names a transfer seen waiting for an OTP with no alert and
// no letter its class's page folded; a transfer named in a page, or whose
// psp_otp_required letter was folded into its class's page, passes.
func TestCheckOTPNamesATransferHeldOnOTPWithoutAnAlert(t *testing.T) {
	db := newWeekDB(t)
	k, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.close)
	su := &suite{pool: db.pool, sink: k, alerts: alertlog.NewRecorder(io.Discard), otpHeld: []pspObject{{ID: "TRF_alerted", PayoutID: "p-alerted"},
		{ID: "TRF_folded", PayoutID: "p-folded"}, {ID: "TRF_silent", PayoutID: "p-silent"}}}
	if _, err := db.pool.Exec(context.Background(), `INSERT INTO dead_letters (source, original_topic, payload, error, error_class, retry_history)
		VALUES ('consumer', 'aegis.transactions', convert_to('{"payout_id":"p-folded"}', 'UTF8'), 'waits for an OTP', 'psp_otp_required', '[{}]'),
		       ('consumer', 'aegis.transactions', convert_to('{"payout_id":"p-silent"}', 'UTF8'), 'refused', 'permanent', '[{}]')`); err != nil {
		t.Fatal(err)
	}
	logAlert(t, su.alerts, "dead_letter:aegis.transactions:psp_otp_required", "p-alerted")
	rep := &Report{Week: &WeekFigures{}}
	if err := su.checkOTP(context.Background(), &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 1 || !strings.Contains(got, "payout p-silent (paystack TRF_silent") ||
		strings.Contains(got, "p-alerted") || strings.Contains(got, "p-folded") {
		t.Fatalf("violations:\n%s\nwant p-silent named", got)
	}
	if w := rep.Week; w.OTPSeen != 3 || w.OTPNamed != 1 || w.OTPFolded != 1 {
		t.Fatalf("figures %+v, want 3 seen, 1 named, 1 folded", *w)
	}
}

// Without its class's page, a psp_otp_required letter alone does not make
// a transfer operator-visible.
func TestCheckOTPWantsTheClassPaged(t *testing.T) {
	db := newWeekDB(t)
	k, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.close)
	su := &suite{pool: db.pool, sink: k, alerts: alertlog.NewRecorder(io.Discard), otpHeld: []pspObject{{ID: "TRF_folded", PayoutID: "p-folded"}}}
	if _, err := db.pool.Exec(context.Background(), `INSERT INTO dead_letters (source, original_topic, payload, error, error_class, retry_history)
		VALUES ('consumer', 'aegis.transactions', convert_to('{"payout_id":"p-folded"}', 'UTF8'), 'waits for an OTP', 'psp_otp_required', '[{}]')`); err != nil {
		t.Fatal(err)
	}
	rep := &Report{}
	if err := su.checkOTP(context.Background(), &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 1 || !strings.Contains(rep.Violations[0], "p-folded") {
		t.Fatalf("violations %q, want p-folded named", rep.Violations)
	}
}

// deliver POSTs body to the sink's receiver name as the relay would: the
// Standard Webhooks headers signed with secret, id as webhook-id. It
// returns the status the receiver answered.
func deliver(t *testing.T, k *sink, name, secret, id string, body []byte) int {
	t.Helper()
	signer, err := outbound.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, k.endpointURL(name), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for h, v := range signer.Headers(id, time.Now(), body) {
		req.Header.Set(h, v)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func newSecret(t *testing.T) string {
	t.Helper()
	s, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The sink's receivers accept a delivery the library verifies under the
// endpoint's secret and count it per webhook-id; they answer 401 to one
// signed with another secret or whose webhook-id is not the body's
// event_id, and 503 before the endpoint is registered; only the flaky one
// refuses while the receiver-down fault is on.
func TestSinkVerifiesEveryDeliveryPerEndpoint(t *testing.T) {
	t.Parallel()
	k, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.close)
	flaky, steady := newSecret(t), newSecret(t)
	body := []byte(`{"event_id":"payout:p1:SUCCEEDED","type":"payout.succeeded","sequence":1}`)
	if got := deliver(t, k, receiverSteady, steady, "payout:p1:SUCCEEDED", body); got != http.StatusServiceUnavailable {
		t.Fatalf("before registration: %d, want 503", got)
	}
	if err := k.register(receiverFlaky, "ep-flaky", flaky); err != nil {
		t.Fatal(err)
	}
	if err := k.register(receiverSteady, "ep-steady", steady); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, secret, id string
		body             []byte
		down             bool
		want             int
	}{
		{receiverFlaky, flaky, "payout:p1:SUCCEEDED", body, false, http.StatusOK},
		{receiverSteady, steady, "payout:p1:SUCCEEDED", body, false, http.StatusOK},
		{receiverSteady, steady, "payout:p1:SUCCEEDED", body, false, http.StatusOK}, // a duplicate
		{receiverFlaky, steady, "payout:p1:SUCCEEDED", body, false, http.StatusUnauthorized},
		{receiverSteady, steady, "payout:p2:SUCCEEDED", body, false, http.StatusUnauthorized},
		{receiverFlaky, flaky, "payout:p1:SUCCEEDED", body, true, http.StatusServiceUnavailable},
		{receiverSteady, steady, "payout:p1:SUCCEEDED", body, true, http.StatusOK},
	} {
		k.setDown(c.down)
		if got := deliver(t, k, c.name, c.secret, c.id, c.body); got != c.want {
			t.Errorf("%s, webhook-id %s, down %t: %d, want %d", c.name, c.id, c.down, got, c.want)
		}
	}
	snap := k.snapshot()
	if len(snap) != 2 || snap[0].Name != receiverFlaky || snap[1].Name != receiverSteady {
		t.Fatalf("receivers %+v", snap)
	}
	f, st := snap[0], snap[1]
	if f.EndpointID != "ep-flaky" || f.Got["payout:p1:SUCCEEDED"] != 1 || f.Delivered != 1 || f.Duplicate != 0 ||
		f.Refused != 1 || len(f.Unverified) != 1 {
		t.Errorf("flaky: %+v; want one delivery, one refused while down, one unverified", f)
	}
	if st.Got["payout:p1:SUCCEEDED"] != 3 || st.Delivered != 1 || st.Duplicate != 2 || st.Refused != 0 || st.NotReady != 1 ||
		len(st.Unverified) != 1 || !strings.Contains(st.Unverified[0], "not the body's event_id") {
		t.Errorf("steady: %+v; want one event three times, one refused before registration, one id mismatch", st)
	}
}

// Invariant 18 names each settlement event that did not reach both
// endpoints, and which endpoint it missed in what state, unless a dead
// letter names it; it names deliveries the library refused; duplicates
// alone are no violation.
func TestCheckSettlementsNamesAnEventThatMissedAnEndpoint(t *testing.T) {
	db := newWeekDB(t)
	ctx := context.Background()
	k, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.close)
	secrets := map[string]string{}
	ids := map[string]string{}
	for _, name := range []string{receiverFlaky, receiverSteady} {
		secrets[name] = newSecret(t)
		var id string
		if err := db.pool.QueryRow(ctx, `INSERT INTO outbound_endpoints (url, secret, created_by) VALUES ($1, $2, 'chaos')
			RETURNING id::text`, k.endpointURL(name), secrets[name]).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[name] = id
		if err := k.register(name, ids[name], secrets[name]); err != nil {
			t.Fatal(err)
		}
	}
	// evt_both reached both (the steady one twice); evt_lettered neither,
	// but a dead letter names it; evt_failed reached only the steady one,
	// the flaky one's delivery failed; evt_lost has no message at all.
	for seq, id := range []string{"evt_both", "evt_lettered", "evt_failed", "evt_lost"} {
		if _, err := db.pool.Exec(ctx, `INSERT INTO transaction_outbox (topic, event_type, payload, status, finished_at)
			VALUES ('aegis.settlements', 'payout.succeeded', jsonb_build_object('event_id', $1::text), 'processed', now())`, id); err != nil {
			t.Fatal(err)
		}
		if id == "evt_lost" || id == "evt_lettered" {
			continue
		}
		body := []byte(`{"event_id":"` + id + `","type":"payout.succeeded","sequence":` + strconv.Itoa(seq+1) + `}`)
		var mid int64
		if err := db.pool.QueryRow(ctx, `INSERT INTO outbound_messages (event_id, event_type, user_id, sequence, occurred_at, body)
			VALUES ($1, 'payout.succeeded', 'u1', $2, now(), $3) RETURNING id`, id, seq+1, body).Scan(&mid); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{receiverFlaky, receiverSteady} {
			state := "succeeded"
			if id == "evt_failed" && name == receiverFlaky {
				state = "failed"
			} else if got := deliver(t, k, name, secrets[name], id, body); got != http.StatusOK {
				t.Fatalf("%s to %s: %d", id, name, got)
			}
			if _, err := db.pool.Exec(ctx, `INSERT INTO outbound_deliveries (message_id, endpoint_id, state, attempts, finished_at)
				VALUES ($1, $2::uuid, $3, 1, now())`, mid, ids[name], state); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := deliver(t, k, receiverSteady, secrets[receiverSteady], "evt_both",
		[]byte(`{"event_id":"evt_both","type":"payout.succeeded","sequence":1}`)); got != http.StatusOK {
		t.Fatalf("the duplicate: %d", got)
	}
	if _, err := db.pool.Exec(ctx, `INSERT INTO dead_letters (source, original_topic, payload, error, error_class, retry_history)
		VALUES ('consumer', 'aegis.settlements', convert_to('{"event_id":"evt_lettered"}', 'UTF8'), 'not a settlements event', 'schema', '[{}]')`); err != nil {
		t.Fatal(err)
	}

	su := &suite{pool: db.pool, sink: k}
	rep := &Report{}
	if err := su.checkSettlements(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 1 || !strings.Contains(got, "2 of 4 settlement events") ||
		!strings.Contains(got, "evt_failed (flaky failed)") || !strings.Contains(got, "evt_lost (flaky no delivery, steady no delivery)") ||
		strings.Contains(got, "evt_both") || strings.Contains(got, "evt_lettered") {
		t.Fatalf("violations:\n%s\nwant evt_failed (flaky) and evt_lost (both) named, nothing else", got)
	}

	// A delivery the library refuses is a violation of its own.
	if got := deliver(t, k, receiverFlaky, secrets[receiverSteady], "evt_both",
		[]byte(`{"event_id":"evt_both"}`)); got != http.StatusUnauthorized {
		t.Fatalf("a delivery under the other endpoint's secret: %d, want 401", got)
	}
	rep = &Report{}
	if err := su.checkSettlements(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	got = strings.Join(rep.Violations, "\n")
	if len(rep.Violations) != 2 || !strings.Contains(got, "1 deliveries to the flaky endpoint failed Standard Webhooks verification") {
		t.Fatalf("violations:\n%s\nwant the unverified delivery named", got)
	}
}

// Invariant 18 passes when every event reached both endpoints or a dead
// letter, and reports the duplicates.
func TestCheckSettlementsPassesWithDuplicates(t *testing.T) {
	db := newWeekDB(t)
	ctx := context.Background()
	k, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.close)
	secret := newSecret(t)
	for _, name := range []string{receiverFlaky, receiverSteady} {
		if err := k.register(name, uuid.NewString(), secret); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.pool.Exec(ctx, `INSERT INTO transaction_outbox (topic, event_type, payload, status, finished_at)
		VALUES ('aegis.settlements', 'refund.posted', '{"event_id":"evt_1"}', 'processed', now())`); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"event_id":"evt_1","type":"refund.posted","sequence":1}`)
	for _, name := range []string{receiverFlaky, receiverSteady, receiverFlaky} {
		if got := deliver(t, k, name, secret, "evt_1", body); got != http.StatusOK {
			t.Fatalf("%s: %d", name, got)
		}
	}
	su := &suite{pool: db.pool, sink: k}
	rep := &Report{}
	if err := su.checkSettlements(ctx, &workload{}, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 0 || len(rep.Checks) != 1 || !strings.Contains(rep.Checks[0], "flaky 1 (1 duplicates") {
		t.Fatalf("violations %q, passed %q; want a pass reporting the flaky duplicate", rep.Violations, rep.Checks)
	}
}

// logAlert writes to rec the structured ALERT line a service logs for key,
// naming payoutID, as the stack's log stream carries it.
func logAlert(t *testing.T, rec *alertlog.Recorder, key, payoutID string) {
	t.Helper()
	line := fmt.Sprintf(`{"level":"ERROR","msg":"ALERT: test","service":"dlq-admin","alert_key":%q,"severity":"error","payout_id":%q}`+"\n",
		key, payoutID)
	if _, err := rec.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
}
