package deliver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deliver"
)

const (
	secret = "whsec_settlements_test_0123456789"
	group  = "settlement-webhooks-test"
	// waitFor guards every wait against hanging; it asserts no timing.
	waitFor = 30 * time.Second
)

// request is one POST the receiver saw.
type request struct {
	eventID, typ, signature string
	body                    []byte
	status                  int
	verified                error
}

// receiver is the platform's endpoint: it verifies each request as a
// receiver must and answers what answer says for the nth request of an
// event id.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	seen   []request
	answer func(eventID string, n int) int
}

func newReceiver(t *testing.T, answer func(eventID string, n int) int) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		q := request{eventID: r.Header.Get(deliver.HeaderEventID), typ: r.Header.Get(deliver.HeaderEventType),
			signature: r.Header.Get(deliver.HeaderSignature), body: body}
		q.verified = deliver.Verify(secret, q.signature, body, 5*time.Minute, time.Now())
		rc.mu.Lock()
		n := 1
		for _, s := range rc.seen {
			if s.eventID == q.eventID {
				n++
			}
		}
		q.status = rc.answer(q.eventID, n)
		rc.seen = append(rc.seen, q)
		rc.mu.Unlock()
		w.WriteHeader(q.status)
		_, _ = w.Write([]byte(`{"note":"from the receiver"}`))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.seen...)
}

// delivered waits until the receiver accepted (2xx) every id in ids.
func (rc *receiver) waitAccepted(t *testing.T, ids ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ok := map[string]bool{}
		for _, q := range rc.requests() {
			if q.status < 300 {
				ok[q.eventID] = true
			}
		}
		for _, id := range ids {
			if !ok[id] {
				return false
			}
		}
		return true
	}, waitFor, 20*time.Millisecond, "not all of %v accepted", ids)
}

type bench struct {
	db      *pgtest.DB
	cluster *kfake.Cluster
	rc      *receiver
	reg     *prometheus.Registry
}

func setup(t *testing.T, answer func(eventID string, n int) int) *bench {
	t.Helper()
	return setupWith(t, answer, func(*deliver.Config) {})
}

func setupWith(t *testing.T, answer func(eventID string, n int) int, tune func(*deliver.Config)) *bench {
	t.Helper()
	b := &bench{db: pgtest.New(t), cluster: kafkatest.NewCluster(t), rc: newReceiver(t, answer), reg: prometheus.NewRegistry()}
	b.run(t, tune, b.db.Pool, nil, b.reg)
	return b
}

// run runs a deliverer of the bench's receiver and cluster, with dead
// letters in pool, until the test ends or stop is called.
func (b *bench) run(t *testing.T, tune func(*deliver.Config), pool *pgxpool.Pool, alerts *alert.Alerter,
	reg *prometheus.Registry,
) (stop func()) {
	t.Helper()
	cfg := deliver.Config{URL: b.rc.srv.URL + "/hooks/aegis", Secret: secret, Group: group,
		Brokers: b.cluster.ListenAddrs(), Timeout: 2 * time.Second,
		Backoff: backoff.Policy{Base: 10 * time.Millisecond, Multiplier: 2, Max: 50 * time.Millisecond, MaxAttempts: 4},
	}
	tune(&cfg)
	d, err := deliver.New(cfg, pool, alerts, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
			d.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// publish produces events on aegis.settlements as the relay would: keyed
// by user, with the outbox's headers.
func (b *bench) publish(t *testing.T, events ...any) {
	t.Helper()
	cl := kafkatest.NewClient(t, b.cluster)
	var recs []*kgo.Record
	for _, e := range events {
		body, err := json.Marshal(e)
		require.NoError(t, err)
		var head event.Settlement
		require.NoError(t, json.Unmarshal(body, &head))
		r := &kgo.Record{Topic: kafkax.TopicSettlements, Key: []byte(head.UserID), Value: body}
		kafkax.SetHeader(r, kafkax.HeaderEventType, string(head.Type))
		kafkax.SetHeader(r, kafkax.HeaderMessageID, head.EventID)
		kafkax.SetHeader(r, kafkax.HeaderCorrelationID, "corr-"+head.EventID)
		recs = append(recs, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

const payoutID = "0192f0c4-6a2e-7c4b-9b4e-1a2b3c4d5e6f"

func payoutSucceeded(user string) event.PayoutOutcome {
	o := event.NewPayoutOutcome(event.TypePayoutSucceeded, payoutID, "SUCCEEDED", user, 1500, "usd", "stripe", time.Now())
	o.PSPReference = "po_1"
	return o
}

func refundPosted(user, refundID string) event.ReturnPosted {
	r := event.NewReturnPosted(event.TypeRefundPosted, "stripe", "refund", refundID, user, 200, "usd", time.Now())
	r.PaymentReference, r.PSPEventID = "pi_1", "evt_"+refundID
	return r
}

func always(code int) func(string, int) int { return func(string, int) int { return code } }

type letter struct {
	status, class, group, key, eventType, errText string
	retryCount                                    int
	payload                                       []byte
}

func (b *bench) letters(t *testing.T) []letter {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT status, error_class, consumer_group, partition_key,
		event_type, error, retry_count, payload FROM dead_letters WHERE original_topic = $1 ORDER BY id`, kafkax.TopicSettlements)
	require.NoError(t, err)
	defer rows.Close()
	var out []letter
	for rows.Next() {
		var l letter
		require.NoError(t, rows.Scan(&l.status, &l.class, &l.group, &l.key, &l.eventType, &l.errText, &l.retryCount, &l.payload))
		out = append(out, l)
	}
	require.NoError(t, rows.Err())
	return out
}

// A payout outcome and a refund posting reach the receiver once each,
// signed so the receiver can verify them, with the event id to dedupe on,
// in the user's order.
func TestSettlementsArriveSignedAndVerifiableInUserOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, always(http.StatusOK))
	payout, refund, refund2 := payoutSucceeded("alice"), refundPosted("alice", "re_1"), refundPosted("alice", "re_2")
	b.publish(t, payout, refund, refund2)
	b.rc.waitAccepted(t, payout.EventID, refund.EventID, refund2.EventID)

	got := b.rc.requests()
	require.Len(t, got, 3, "each event once")
	require.Equal(t, []string{payout.EventID, refund.EventID, refund2.EventID},
		[]string{got[0].eventID, got[1].eventID, got[2].eventID}, "one user's events in order")
	for i, want := range []any{payout, refund, refund2} {
		q := got[i]
		require.NoError(t, q.verified, "receiver verifies %s", q.eventID)
		wantBody, err := json.Marshal(want)
		require.NoError(t, err)
		require.JSONEq(t, string(wantBody), string(q.body), "the body is the event as published")
		require.NotEqual(t, deliver.Verify("another_secret_0123456789", q.signature, q.body, time.Minute, time.Now()), nil,
			"a signature under another secret does not verify")
		tampered := append([]byte(nil), q.body...)
		tampered[len(tampered)-2] ^= 1
		require.Error(t, deliver.Verify(secret, q.signature, tampered, time.Minute, time.Now()), "a changed body does not verify")
	}
	require.Equal(t, string(event.TypePayoutSucceeded), got[0].typ)
	require.Equal(t, string(event.TypeRefundPosted), got[1].typ)
	require.Empty(t, b.letters(t))
}

// 500, 500, then 200: delivered once, after two retries, with the same
// event id each time; no dead letter.
func TestServerErrorsAreRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ string, n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	refund := refundPosted("bob", "re_9")
	b.publish(t, refund)
	b.rc.waitAccepted(t, refund.EventID)
	got := b.rc.requests()
	require.Len(t, got, 3)
	var accepted int
	for _, q := range got {
		require.Equal(t, refund.EventID, q.eventID)
		require.NoError(t, q.verified)
		if q.status == http.StatusOK {
			accepted++
		}
	}
	require.Equal(t, 1, accepted, "delivered once")
	require.Empty(t, b.letters(t))
}

// A 400 is permanent: no retry, a dead letter ops can see and replay, and
// the events behind it still go out.
func TestClientErrorIsADeadLetterAndBlocksNothing(t *testing.T) {
	t.Parallel()
	bad := refundPosted("carol", "re_bad")
	b := setup(t, func(id string, _ int) int {
		if id == bad.EventID {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	next := payoutSucceeded("carol")
	b.publish(t, bad, next)
	b.rc.waitAccepted(t, next.EventID)

	var letters []letter
	require.Eventually(t, func() bool { letters = b.letters(t); return len(letters) == 1 }, waitFor, 20*time.Millisecond)
	l := letters[0]
	require.Equal(t, "open", l.status)
	require.Equal(t, "permanent", l.class)
	require.Equal(t, group, l.group)
	require.Equal(t, "carol", l.key)
	require.Equal(t, string(event.TypeRefundPosted), l.eventType)
	require.Contains(t, l.errText, "receiver answered 400")
	require.Equal(t, 1, l.retryCount)
	wantBody, err := json.Marshal(bad)
	require.NoError(t, err)
	require.JSONEq(t, string(wantBody), string(l.payload))
	n := 0
	for _, q := range b.rc.requests() {
		if q.eventID == bad.EventID {
			n++
		}
	}
	require.Equal(t, 1, n, "a 400 is not retried")
}

// A receiver that keeps failing gets the bounded retries, then the event is
// a dead letter; a body that is not the published contract is never sent.
func TestExhaustedRetriesAndOffContractBodiesAreDeadLetters(t *testing.T) {
	t.Parallel()
	down := refundPosted("dave", "re_down")
	b := setup(t, func(id string, _ int) int {
		if id == down.EventID {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	broken := payoutSucceeded("erin")
	broken.Currency = "USD" // not the schema's lower-case ISO code
	after := payoutSucceeded("erin")
	after.EventID = "payout:" + payoutID + ":SUCCEEDED:again"
	b.publish(t, down, broken, after)
	b.rc.waitAccepted(t, after.EventID)

	var letters []letter
	require.Eventually(t, func() bool { letters = b.letters(t); return len(letters) == 2 }, waitFor, 20*time.Millisecond)
	byKey := map[string]letter{letters[0].key: letters[0], letters[1].key: letters[1]}
	require.Equal(t, "retries_exhausted", byKey["dave"].class)
	require.Equal(t, 4, byKey["dave"].retryCount, "SETTLEMENT_WEBHOOK_MAX_ATTEMPTS attempts in all")
	require.Equal(t, "permanent", byKey["erin"].class)
	require.Contains(t, byKey["erin"].errText, "does not match schema")
	for _, q := range b.rc.requests() {
		var e event.Settlement
		require.NoError(t, json.Unmarshal(q.body, &e))
		require.NotEqual(t, "USD", e.Currency, "an off-contract body was sent")
	}
}

// Past BatchFor the rest of a batch is rewound and polled again: nothing is
// lost, skipped, sent twice or reordered by it.
func TestBatchBudgetRewindsWithoutLossOrReorder(t *testing.T) {
	t.Parallel()
	b := setupWith(t, always(http.StatusOK), func(c *deliver.Config) { c.BatchFor = time.Nanosecond })
	var events []any
	var ids []string
	for _, id := range []string{"re_a", "re_b", "re_c", "re_d", "re_e"} {
		e := refundPosted("gina", id)
		events, ids = append(events, e), append(ids, e.EventID)
	}
	b.publish(t, events...)
	b.rc.waitAccepted(t, ids...)
	var got []string
	for _, q := range b.rc.requests() {
		got = append(got, q.eventID)
	}
	require.Equal(t, ids, got, "each once, in order")
}
