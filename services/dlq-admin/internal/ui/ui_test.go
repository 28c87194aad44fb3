package ui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/api"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/endpoints"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/jobs"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/resolution"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ui"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789"
)

type noAlerts struct{}

func (noAlerts) Raise(context.Context, alert.Alert) {}

// serve runs dlq-admin's HTTP handler (API and page) on db.
func serve(t *testing.T, db *pgtest.DB) string {
	t.Helper()
	return serveWith(t, db, serverConfig{})
}

// serverConfig adds what some browser tests need: a replay-job runner (at
// runnerRate letters a second) and faults injected in front of the API.
type serverConfig struct {
	runnerRate float64
	faults     *faults
	// fourEyes is REQUIRE_SECOND_APPROVER and SECOND_APPROVER_THRESHOLD.
	fourEyes fourEyesConfig
}

type fourEyesConfig struct {
	RequireSecondApprover bool
	Threshold             int
}

// faults lets a test make one API path slow or failing, the way a flaky
// network or a busy Postgres would.
type faults struct {
	mu    sync.Mutex
	rules map[string]fault
}

type fault struct {
	// hold, when not nil, delays the request until it is closed.
	hold chan struct{}
	// status, when not 0, answers it instead of the API.
	status int
}

func newFaults() *faults { return &faults{rules: map[string]fault{}} }

func (f *faults) set(path string, ft fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules[path] = ft
}

func (f *faults) clear(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rules, path)
}

func (f *faults) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		ft, ok := f.rules[r.URL.Path]
		f.mu.Unlock()
		if ok && ft.hold != nil {
			select {
			case <-ft.hold:
			case <-r.Context().Done():
				return
			}
		}
		if ok && ft.status != 0 {
			httpserver.WriteError(w, ft.status, "unavailable", "injected by the test")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func serveWith(t *testing.T, db *pgtest.DB, cfg serverConfig) string {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	tokens, err := bearer.Parse("ops:operator:"+operatorToken+",night:viewer:"+viewerToken+",sam:operator:"+secondOperatorToken, api.Roles())
	require.NoError(t, err)
	reg := httpserver.NewRegistry()
	r := httpserver.NewRouter(logger, reg)
	st := store.New(db.Pool)
	rec, err := recon.New(db.Pool, noAlerts{}, lifecycle.Deps{Logger: logger, Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	queue, err := jobs.InsertOnly(db.Pool, logger)
	require.NoError(t, err)
	deps := lifecycle.Deps{Logger: logger, Clock: time.Now}
	gate := approval.New(db.Pool, cfg.fourEyes.RequireSecondApprover, deps)
	svc := replay.New(db.Pool, st, deps).WithJobs(queue).WithApproval(gate, cfg.fourEyes.Threshold)
	resolutions := resolution.New(db.Pool, deps).WithApproval(gate, 0)
	gate.Register(replay.ApprovalKind, svc.BulkApprovals()).Register(resolution.ApprovalKind, resolutions.Approvals())
	api.Mount(r, api.Deps{Logger: logger, Store: st, Payouts: payouts.New(db.Pool), Replay: svc, Recon: rec, Tokens: tokens,
		Now: time.Now, Resolutions: resolutions, Approvals: gate,
		Outbound: endpoints.New(db.Pool, endpoints.Config{RotationOverlap: endpoints.DefaultRotationOverlap, RecoverRate: 100}, time.Now)})
	require.NoError(t, ui.Mount(r))
	var h http.Handler = r
	if cfg.faults != nil {
		h = cfg.faults.wrap(r)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if cfg.runnerRate > 0 {
		// A worker's own Service: the API's keeps its insert-only client.
		worker := replay.New(db.Pool, st, lifecycle.Deps{Logger: logger, Clock: time.Now})
		runner, err := jobs.New(db.Pool, worker, nil, jobs.Config{ReplayRate: cfg.runnerRate, FetchPoll: 50 * time.Millisecond},
			lifecycle.Deps{Logger: logger})
		require.NoError(t, err)
		require.NoError(t, runner.Start(context.Background()))
		t.Cleanup(func() { require.NoError(t, runner.Stop(context.Background())) })
	}
	return srv.URL
}

// seeded is a realistic night: a payout whose PSP answer was lost, a
// credit without an owner, a rejected account, a poison record, ...
type seeded struct {
	needsReview, invalidAccount, noUser, poison int64
	open                                        []int64
}

func seed(t *testing.T, db *pgtest.DB) seeded {
	t.Helper()
	ctx := context.Background()
	base := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	var s seeded
	n := int64(0)
	add := func(topic, class, errText, eventType string, payload []byte, retries int, at time.Time) int64 {
		n++
		p, o := int32(n%3), 1000+n
		hist := []dlq.Attempt{}
		for i := range retries {
			hist = append(hist, dlq.Attempt{At: at.Add(-time.Duration(retries-i) * time.Second), Error: errText, Class: class})
		}
		id, ok, err := dlq.Insert(ctx, db.Pool, dlq.Letter{
			Source: dlq.SourceConsumer, OriginalTopic: topic, OriginalPartition: &p, OriginalOffset: &o,
			ConsumerGroup: "payout-worker", PartitionKey: "alice", EventType: eventType, Payload: payload,
			Headers: map[string]string{kafkax.HeaderMessageID: fmt.Sprintf("msg-%d", n), kafkax.HeaderCorrelationID: fmt.Sprintf("c0ffee%02d", n),
				kafkax.HeaderEventType: eventType, "authorization": "Bearer sk_live_do_not_show"},
			Error: errText, ErrorClass: class, RetryCount: retries, RetryHistory: hist,
			FirstFailureAt: at.Add(-time.Minute), FailedAt: at, CorrelationID: fmt.Sprintf("c0ffee%02d", n),
		})
		require.NoError(t, err)
		require.True(t, ok)
		return id
	}
	payout := func(id string) []byte {
		return []byte(fmt.Sprintf(`{"payout_id":%q,"user_id":"alice","amount":1500,"currency":"usd","provider":"stripe","destination":"ba_alice","account_number":"000123456789"}`, id))
	}
	s.needsReview = add(kafkax.TopicTransactions, "transient",
		"retries exhausted; the PSP may have executed the last attempt: stripe 504: request timed out", "payout.requested", payout("po-7f3a"), 5, base)
	s.invalidAccount = add(kafkax.TopicTransactions, "permanent", "stripe 400 account_invalid: the bank account is closed", "payout.requested", payout("po-91bc"), 1, base.Add(20*time.Minute))
	s.noUser = add(kafkax.TopicWebhookPending, "permanent", "credit without a user id", "payment_intent.succeeded",
		[]byte(`{"provider":"stripe","event_id":"evt_3Nx","action":"credit","amount":5000,"currency":"usd","card":{"number":"4242424242424242","exp_month":4}}`), 1, base.Add(40*time.Minute))
	s.poison = add(kafkax.TopicSettlements, "poison", "payout outcome is not decodable: invalid character 'x'", "payout.succeeded", []byte("x\x00\xffgarbage"), 0, base.Add(70*time.Minute))
	add(kafkax.TopicTransactions, "transient", "stripe 503: service unavailable", "payout.requested", payout("po-22de"), 5, base.Add(90*time.Minute))
	done := add(kafkax.TopicWebhookPending, "permanent", "credit amount 0 is not positive", "charge.succeeded", []byte(`{"provider":"stripe","event_id":"evt_zero"}`), 1, base.Add(100*time.Minute))
	_, err := db.Pool.Exec(ctx, `UPDATE dead_letters SET status = 'discarded', resolved_by = 'night', resolved_at = now(), resolution_reason = 'test event from the PSP dashboard' WHERE id = $1`, done)
	require.NoError(t, err)
	rows, err := db.Pool.Query(ctx, `SELECT id FROM dead_letters WHERE status = 'open' ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		s.open = append(s.open, id)
	}
	require.NoError(t, rows.Err())
	return s
}

func TestPageIsServedWithAStrictPolicy(t *testing.T) {
	t.Parallel()
	url := serve(t, pgtest.New(t))
	for path, ctype := range map[string]string{"/": "text/html", "/ui/app.js": "javascript", "/ui/app.css": "text/css"} {
		resp, err := http.Get(url + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Contains(t, resp.Header.Get("Content-Type"), ctype, path)
		require.Equal(t, ui.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"), path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		require.NotEmpty(t, body)
		if path == "/" {
			html := string(body)
			require.NotContains(t, html, "<script>", "no inline script")
			require.NotContains(t, html, "style=", "no inline style")
			require.Contains(t, html, `<script src="/ui/app.js" defer></script>`)
		}
	}
	require.Contains(t, ui.ContentSecurityPolicy, "script-src 'self';")
	require.NotContains(t, ui.ContentSecurityPolicy, "unsafe-inline")

	// No directory listing, and the page needs no token while the API does.
	resp, err := http.Get(url + "/ui/")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, err = http.Get(url + "/v1/dead-letters")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.False(t, strings.Contains(url, "token"))
}
