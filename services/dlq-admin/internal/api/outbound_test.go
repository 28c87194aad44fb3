package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/api"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/endpoints"
)

// outboundBundle is dlq-admin's API with the outbound routes, its service
// on a pool of dlq-admin's own role (so the grants of migration 000041 are
// what the tests exercise); db.Pool (the owner) plays the relay.
type outboundBundle struct {
	db  *pgtest.DB
	url string
}

func setupOutbound(t *testing.T, policy outbound.Policy) outboundBundle {
	t.Helper()
	db := pgtest.New(t)
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	tokens, err := bearer.Parse("alice:viewer:"+viewerToken+",bob:operator:"+operatorToken, api.Roles())
	require.NoError(t, err)
	r := httpserver.NewRouter(logger, httpserver.NewRegistry())
	svc := endpoints.New(db.As(t, "aegis_dlq_admin"), endpoints.Config{Policy: policy,
		RotationOverlap: endpoints.DefaultRotationOverlap, RecoverRate: 2}, time.Now)
	api.Mount(r, api.Deps{Logger: logger, Tokens: tokens, Now: time.Now, Outbound: svc})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return outboundBundle{db: db, url: srv.URL}
}

func (b outboundBundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

func (b outboundBundle) create(t *testing.T, body string) map[string]any {
	t.Helper()
	a := call(t, http.MethodPost, b.url+"/v1/outbound/endpoints", operatorToken, body)
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	return a.body
}

// message inserts a message as the relay would, created at created.
func (b outboundBundle) message(t *testing.T, eventID, typ, user string, seq int64, created time.Time) int64 {
	t.Helper()
	var id int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
		INSERT INTO outbound_messages (event_id, event_type, user_id, sequence, occurred_at, body, created_at)
		VALUES ($1, $2, $3, $4, $5, convert_to(json_build_object('event_id', $1::text, 'type', $2::text, 'sequence', $4::bigint)::text, 'UTF8'), $5)
		RETURNING id`, eventID, typ, user, seq, created).Scan(&id))
	return id
}

// delivery inserts a delivery of message to endpoint in state, with
// attempts attempts logged (the last one's outcome matching the state).
func (b outboundBundle) delivery(t *testing.T, message int64, endpoint, state string, attempts int) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, `
		INSERT INTO outbound_deliveries (message_id, endpoint_id, state, attempts, last_attempt_at, last_status, finished_at)
		VALUES ($1, $2, $3, $4, CASE WHEN $4 > 0 THEN now() END, CASE $3 WHEN 'succeeded' THEN 200 WHEN 'failed' THEN 500 END,
		        CASE WHEN $3 <> 'pending' THEN now() END)
		RETURNING id`, message, endpoint, state, attempts).Scan(&id))
	for i := 1; i <= attempts; i++ {
		outcome, status := "retry", 500
		if i == attempts && state == "succeeded" {
			outcome, status = "delivered", 200
		} else if i == attempts && state == "failed" {
			outcome = "failed"
		}
		_, err := b.db.Pool.Exec(ctx, `
			INSERT INTO outbound_attempts (delivery_id, message_id, endpoint_id, attempt, attempted_at, outcome, status_code, latency_ms, response_body)
			VALUES ($1, $2, $3, $4, now(), $5, $6, 12, 'answer')`, id, message, endpoint, i, outcome, status)
		require.NoError(t, err)
	}
	return id
}

// An operator manages an endpoint from creation to deletion; every change
// is in the row and in the audit log (URL redacted, no secret); a viewer
// reads but cannot change anything nor read a secret.
func TestOutboundEndpointLifecycle(t *testing.T) {
	t.Parallel()
	b := setupOutbound(t, outbound.Policy{})
	ctx := context.Background()
	eps := b.url + "/v1/outbound/endpoints"
	const target = "https://hooks.example.com/aegis/tok_secretpath?key=abc"

	a := call(t, http.MethodPost, eps, viewerToken, `{"url":"`+target+`"}`)
	require.Equal(t, http.StatusForbidden, a.status, a.raw)
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM outbound_endpoints`))

	created := b.create(t, `{"url":"`+target+`","description":"shop ledger","event_types":["payout.*","refund.posted"],"rate_limit":5}`)
	id := created["id"].(string)
	secret := created["secret"].(string)
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	_, err := outbound.ParseSecret(secret)
	require.NoError(t, err)
	require.Equal(t, target, created["url"], "operators see the URL they manage")
	require.Equal(t, []any{"payout.*", "refund.posted"}, created["event_types"])
	require.Equal(t, float64(5), created["rate_limit"])
	require.Equal(t, true, created["enabled"])
	require.Equal(t, "bob", created["created_by"])
	require.Equal(t, false, created["has_legacy_secret"])
	require.Nil(t, created["failing_since"])
	require.Equal(t, float64(0), created["pending"])
	var stored string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT secret FROM outbound_endpoints WHERE id = $1`, id).Scan(&stored))
	require.Equal(t, secret, stored)
	var detail, auditActor string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT actor, detail::text FROM audit_log WHERE action = 'outbound_endpoint_create' AND target_id = $1`, id).
		Scan(&auditActor, &detail))
	require.Equal(t, "bob", auditActor)
	require.Contains(t, detail, "https://hooks.example.com/…")
	require.NotContains(t, detail, "tok_secretpath", "the audit log names the URL redacted")
	require.NotContains(t, detail, secret)

	// Reads: no secret anywhere but where documented; a viewer reads the
	// URL as the logs show it.
	for tok, url := range map[string]string{viewerToken: "https://hooks.example.com/…", operatorToken: target} {
		a = get(t, eps, tok)
		require.Equal(t, http.StatusOK, a.status, a.raw)
		require.NotContains(t, a.raw, secret)
		require.NotContains(t, a.raw, `"secret"`)
		items := a.body["items"].([]any)
		require.Len(t, items, 1)
		require.Contains(t, a.body, "next_before_id")
		require.Equal(t, id, items[0].(map[string]any)["id"])
		require.Equal(t, url, items[0].(map[string]any)["url"])
		a = get(t, eps+"/"+id, tok)
		require.Equal(t, http.StatusOK, a.status, a.raw)
		require.NotContains(t, a.raw, secret)
		require.Equal(t, url, a.body["url"])
	}

	// A viewer changes nothing, whatever the route.
	for _, w := range []struct{ method, path, body string }{
		{http.MethodPatch, eps + "/" + id, `{"description":"x"}`},
		{http.MethodDelete, eps + "/" + id, ""},
		{http.MethodPost, eps + "/" + id + "/disable", `{"reason":"x"}`},
		{http.MethodPost, eps + "/" + id + "/enable", ""},
		{http.MethodPost, eps + "/" + id + "/rotate-secret", ""},
		{http.MethodPost, eps + "/" + id + "/recover", `{"since":"2026-11-20T10:00:00Z"}`},
		{http.MethodPost, b.url + "/v1/outbound/messages/1/resend", `{"endpoint_id":"` + id + `"}`},
		{http.MethodPost, b.url + "/v1/outbound/deliveries/1/resend", ""},
	} {
		a = call(t, w.method, w.path, viewerToken, w.body)
		require.Equal(t, http.StatusForbidden, a.status, "%s %s: %s", w.method, w.path, a.raw)
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log`), "only the creation")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND enabled AND description = 'shop ledger'`, id))
	a = get(t, eps+"/"+id+"/secret", viewerToken)
	require.Equal(t, http.StatusForbidden, a.status, a.raw)
	a = get(t, eps+"/"+id+"/secret", operatorToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, secret, a.body["secret"])
	require.Nil(t, a.body["previous_secret_expires_at"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'outbound_endpoint_read_secret' AND actor = 'bob'`))
	require.Equal(t, http.StatusNotFound, get(t, eps+"/"+uuid.NewString(), viewerToken).status)
	a = get(t, eps+"/not-a-uuid", viewerToken)
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)
	require.Equal(t, "invalid_request", a.errorCode())

	// Change: absent fields stay, null clears.
	a = call(t, http.MethodPatch, eps+"/"+id, operatorToken, `{"description":"ledger v2","rate_limit":null,"legacy_secret":"legacy-secret-0123456789"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "ledger v2", a.body["description"])
	require.Nil(t, a.body["rate_limit"])
	require.Equal(t, true, a.body["has_legacy_secret"])
	require.Equal(t, target, a.body["url"])
	require.Equal(t, []any{"payout.*", "refund.posted"}, a.body["event_types"])
	require.NotContains(t, a.raw, "legacy-secret-0123456789")
	var legacy *string
	var rate *int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT legacy_secret, rate_limit FROM outbound_endpoints WHERE id = $1`, id).Scan(&legacy, &rate))
	require.Equal(t, "legacy-secret-0123456789", *legacy)
	require.Nil(t, rate)
	a = call(t, http.MethodPatch, eps+"/"+id, operatorToken, `{"legacy_secret":null,"event_types":[]}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, false, a.body["has_legacy_secret"])
	require.Equal(t, []any{}, a.body["event_types"])
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'outbound_endpoint_update'`))

	// Disable needs a reason; enable restarts the streak.
	a = call(t, http.MethodPost, eps+"/"+id+"/disable", operatorToken, `{"reason":""}`)
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)
	a = call(t, http.MethodPost, eps+"/"+id+"/disable", operatorToken, `{"reason":"receiver migrating"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, false, a.body["enabled"])
	require.Equal(t, "bob", a.body["disabled_by"])
	require.Equal(t, "receiver migrating", a.body["disabled_reason"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND NOT enabled AND disabled_at IS NOT NULL`, id))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'outbound_endpoint_disable' AND reason = 'receiver migrating'`))
	var enabledAt time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT enabled_at FROM outbound_endpoints WHERE id = $1`, id).Scan(&enabledAt))
	a = call(t, http.MethodPost, eps+"/"+id+"/enable", operatorToken, "")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, true, a.body["enabled"])
	require.Nil(t, a.body["disabled_at"])
	require.Nil(t, a.body["disabled_reason"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND enabled AND enabled_at > $2
		AND disabled_at IS NULL AND disabled_by IS NULL AND disabled_reason IS NULL`, id, enabledAt))

	// Rotation: the old secret signs for the overlap; a second rotation
	// within it drops the oldest.
	a = call(t, http.MethodPost, eps+"/"+id+"/rotate-secret", operatorToken, "")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	second := a.body["secret"].(string)
	require.NotEqual(t, secret, second)
	require.NotNil(t, a.body["previous_secret_expires_at"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND secret = $2 AND previous_secret = $3
		AND previous_secret_expires_at BETWEEN now() + interval '23 hours 59 minutes' AND now() + interval '24 hours'`, id, second, secret))
	a = call(t, http.MethodPost, eps+"/"+id+"/rotate-secret", operatorToken, `{"secret":"whsec_short"}`)
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)
	require.Contains(t, a.errorMessage(), "secret")
	third, err := outbound.NewSecret()
	require.NoError(t, err)
	a = call(t, http.MethodPost, eps+"/"+id+"/rotate-secret", operatorToken, `{"secret":"`+third+`","reason":"leaked in a ticket"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, third, a.body["secret"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND secret = $2 AND previous_secret = $3`, id, third, second))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM outbound_endpoints WHERE secret = $1 OR previous_secret = $1`, secret), "the oldest is dropped")
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'outbound_endpoint_rotate_secret'`))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM audit_log WHERE detail::text LIKE '%whsec_%'`), "no secret in the audit log")
	a = call(t, http.MethodPost, eps+"/"+id+"/rotate-secret", viewerToken, "")
	require.Equal(t, http.StatusForbidden, a.status, a.raw)

	// Delete: soft, gone from the API, the row stays.
	a = call(t, http.MethodDelete, eps+"/"+id, viewerToken, "")
	require.Equal(t, http.StatusForbidden, a.status, a.raw)
	a = call(t, http.MethodDelete, eps+"/"+id, operatorToken, "")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND deleted_at IS NOT NULL AND NOT enabled
		AND disabled_reason = 'deleted' AND disabled_by = 'bob'`, id))
	require.Equal(t, http.StatusNotFound, get(t, eps+"/"+id, viewerToken).status)
	require.Equal(t, http.StatusNotFound, call(t, http.MethodDelete, eps+"/"+id, operatorToken, "").status)
	require.Equal(t, http.StatusNotFound, call(t, http.MethodPost, eps+"/"+id+"/enable", operatorToken, "").status)
	a = get(t, eps, viewerToken)
	require.Equal(t, []any{}, a.body["items"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'outbound_endpoint_delete'`))
}

// Bad input is refused with the contract's error shape, naming the field,
// and writes nothing.
func TestOutboundEndpointRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setupOutbound(t, outbound.Policy{})
	eps := b.url + "/v1/outbound/endpoints"
	for body, field := range map[string]string{
		`{"url":"http://hooks.example.com/x"}`:                                                    "url",
		`{"url":"https://10.0.0.7/x"}`:                                                            "url",
		`{"url":"https://169.254.169.254/latest"}`:                                                "url",
		`{"url":"https://user:pw@hooks.example.com/x"}`:                                           "url",
		`{"url":"https://localhost/x"}`:                                                           "url",
		`{"url":""}`:                                                                              "url",
		`{"url":"https://hooks.example.com/x","event_types":["payout.nope"]}`:                     "event_types",
		`{"url":"https://hooks.example.com/x","event_types":["*"]}`:                               "event_types",
		`{"url":"https://hooks.example.com/x","rate_limit":0}`:                                    "rate_limit",
		`{"url":"https://hooks.example.com/x","rate_limit":-3}`:                                   "rate_limit",
		`{"url":"https://hooks.example.com/x","legacy_secret":"short"}`:                           "legacy_secret",
		`{"url":"https://hooks.example.com/x","description":"` + strings.Repeat("d", 1025) + `"}`: "description",
		`{"url":"https://hooks.example.com/x","secret":"whsec_chosen"}`:                           "secret",
		`{"url":"https://hooks.example.com/x","rate_limit":"fast"}`:                               "rate_limit",
	} {
		a := call(t, http.MethodPost, eps, operatorToken, body)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", body, a.raw)
		require.Equal(t, "invalid_request", a.errorCode(), body)
		require.Contains(t, a.errorMessage(), field, body)
		require.NotContains(t, a.errorMessage(), "hooks.example.com/x", "errors do not echo the URL")
	}
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM outbound_endpoints`))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM audit_log`))

	id := b.create(t, `{"url":"https://hooks.example.com/x"}`)["id"].(string)
	for body, field := range map[string]string{
		`{"url":"https://127.0.0.1/x"}`:  "url",
		`{"rate_limit":0}`:               "rate_limit",
		`{"event_types":["dispute.*x"]}`: "event_types",
		`{}`:                             "body",
	} {
		a := call(t, http.MethodPatch, eps+"/"+id, operatorToken, body)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", body, a.raw)
		require.Contains(t, a.errorMessage(), field, body)
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_endpoints WHERE url = 'https://hooks.example.com/x' AND rate_limit IS NULL`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log`), "only the creation")

	// Development's policy allows a receiver on this machine.
	dev := setupOutbound(t, outbound.Policy{AllowHTTP: true, AllowPrivate: true})
	dev.create(t, `{"url":"http://127.0.0.1:9999/hook"}`)
}

// "Recover since" schedules exactly what the endpoint wants and did not
// receive since then, spaced at the recover rate; a failed delivery is
// rescheduled, a succeeded or pending one is left alone.
func TestOutboundRecoverSchedulesWhatTheEndpointMissed(t *testing.T) {
	t.Parallel()
	b := setupOutbound(t, outbound.Policy{})
	ctx := context.Background()
	id := b.create(t, `{"url":"https://hooks.example.com/x","event_types":["payout.*"]}`)["id"].(string)
	since := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	before := b.message(t, "ev-before", "payout.failed", "u1", 1, since.Add(-time.Minute))
	got := b.message(t, "ev-got", "payout.succeeded", "u1", 2, since.Add(time.Minute))
	failed := b.message(t, "ev-failed", "payout.failed", "u1", 3, since.Add(2*time.Minute))
	missed := b.message(t, "ev-missed", "payout.succeeded", "u2", 1, since.Add(3*time.Minute))
	unwanted := b.message(t, "ev-refund", "refund.posted", "u2", 2, since.Add(4*time.Minute))
	waiting := b.message(t, "ev-waiting", "payout.canceled", "u2", 3, since.Add(5*time.Minute))
	b.delivery(t, got, id, "succeeded", 1)
	failedDelivery := b.delivery(t, failed, id, "failed", 8)
	b.delivery(t, waiting, id, "pending", 2)

	rec := b.url + "/v1/outbound/endpoints/" + id + "/recover"
	a := call(t, http.MethodPost, rec, viewerToken, `{"since":"`+since.Format(time.RFC3339)+`"}`)
	require.Equal(t, http.StatusForbidden, a.status, a.raw)
	a = call(t, http.MethodPost, rec, operatorToken, `{"since":"`+time.Now().Add(time.Hour).Format(time.RFC3339)+`"}`)
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)
	require.Contains(t, a.errorMessage(), "future")
	a = call(t, http.MethodPost, rec, operatorToken, `{"since":"yesterday"}`)
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)
	a = call(t, http.MethodPost, b.url+"/v1/outbound/endpoints/"+uuid.NewString()+"/recover", operatorToken, `{"since":"`+since.Format(time.RFC3339)+`"}`)
	require.Equal(t, http.StatusNotFound, a.status, a.raw)

	a = call(t, http.MethodPost, rec, operatorToken, `{"since":"`+since.Format(time.RFC3339)+`","reason":"receiver was down"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, float64(2), a.body["scheduled"])
	// The failed one again from scratch, the missed one new; half a second
	// apart (rate 2/s), in message order.
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_deliveries WHERE id = $1 AND state = 'pending' AND attempts = 0 AND finished_at IS NULL`, failedDelivery))
	var gap time.Duration
	require.NoError(t, b.db.Pool.QueryRow(ctx, `
		SELECT (SELECT next_attempt_at FROM outbound_deliveries WHERE message_id = $2 AND endpoint_id = $3)
		     - (SELECT next_attempt_at FROM outbound_deliveries WHERE message_id = $1 AND endpoint_id = $3)`, failed, missed, id).Scan(&gap))
	require.Equal(t, 500*time.Millisecond, gap)
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM outbound_deliveries WHERE message_id = ANY($1)`, []int64{before, unwanted}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_deliveries WHERE message_id = $1 AND state = 'succeeded'`, got))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_deliveries WHERE message_id = $1 AND state = 'pending' AND attempts = 2`, waiting))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'outbound_endpoint_recover' AND reason = 'receiver was down'
		AND (detail->>'scheduled')::int = 2`))

	a = get(t, b.url+"/v1/outbound/endpoints/"+id, viewerToken)
	require.Equal(t, float64(3), a.body["pending"])
	require.NotNil(t, a.body["oldest_pending_at"])
}

// Re-sends, the delivery log per endpoint and per message, and the message
// list, paged newest first.
func TestOutboundResendAndDeliveryLog(t *testing.T) {
	t.Parallel()
	b := setupOutbound(t, outbound.Policy{})
	id := b.create(t, `{"url":"https://hooks.example.com/x"}`)["id"].(string)
	other := b.create(t, `{"url":"https://other.example.com/y"}`)["id"].(string)
	at := time.Now().Add(-time.Hour).UTC()
	m1 := b.message(t, "ev-1", "payout.succeeded", "u1", 1, at)
	m2 := b.message(t, "ev-2", "payout.failed", "u1", 2, at.Add(time.Minute))
	m3 := b.message(t, "ev-3", "refund.posted", "u2", 1, at.Add(2*time.Minute))
	d1 := b.delivery(t, m1, id, "succeeded", 2)
	d2 := b.delivery(t, m2, id, "failed", 3)
	d3 := b.delivery(t, m3, id, "pending", 1)

	// Deliveries, newest first, paged.
	dl := b.url + "/v1/outbound/endpoints/" + id + "/deliveries"
	a := get(t, dl+"?limit=2", viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	items := a.body["items"].([]any)
	require.Len(t, items, 2)
	require.Equal(t, float64(d3), items[0].(map[string]any)["id"])
	require.Equal(t, float64(d2), items[1].(map[string]any)["id"])
	require.Equal(t, float64(d2), a.body["next_before_id"])
	a = get(t, fmt.Sprintf("%s?limit=2&before_id=%d", dl, d2), viewerToken)
	items = a.body["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, float64(d1), items[0].(map[string]any)["id"])
	require.Nil(t, a.body["next_before_id"])
	a = get(t, dl+"?state=failed", viewerToken)
	items = a.body["items"].([]any)
	require.Len(t, items, 1)
	d := items[0].(map[string]any)
	require.Equal(t, float64(d2), d["id"])
	require.Equal(t, "failed", d["state"])
	require.Equal(t, float64(500), d["last_status"])
	require.Equal(t, float64(m2), d["message_id"])
	require.Equal(t, id, d["endpoint_id"])
	require.Equal(t, http.StatusBadRequest, get(t, dl+"?state=lost", viewerToken).status)
	require.Equal(t, http.StatusBadRequest, get(t, dl+"?before_id=x", viewerToken).status)
	require.Equal(t, http.StatusNotFound, get(t, b.url+"/v1/outbound/endpoints/"+uuid.NewString()+"/deliveries", viewerToken).status)

	// Attempts: 6 in all, newest first.
	al := b.url + "/v1/outbound/endpoints/" + id + "/attempts"
	a = get(t, al+"?limit=4", viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	items = a.body["items"].([]any)
	require.Len(t, items, 4)
	first := items[0].(map[string]any)
	require.Equal(t, float64(d3), first["delivery_id"])
	require.Equal(t, "retry", first["outcome"])
	require.Equal(t, float64(12), first["latency_ms"])
	require.Equal(t, "answer", first["response_body"])
	next := a.body["next_before_id"].(float64)
	a = get(t, fmt.Sprintf("%s?limit=4&before_id=%d", al, int64(next)), viewerToken)
	require.Len(t, a.body["items"], 2)
	require.Nil(t, a.body["next_before_id"])

	// Re-send one delivery: a failed one is due now, counted afresh; a
	// succeeded one is refused (re-send the message instead).
	a = call(t, http.MethodPost, fmt.Sprintf("%s/v1/outbound/deliveries/%d/resend", b.url, d2), viewerToken, "")
	require.Equal(t, http.StatusForbidden, a.status, a.raw)
	a = call(t, http.MethodPost, fmt.Sprintf("%s/v1/outbound/deliveries/%d/resend", b.url, d2), operatorToken, `{"reason":"fixed their TLS"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "pending", a.body["state"])
	require.Equal(t, float64(0), a.body["attempts"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_deliveries WHERE id = $1 AND state = 'pending' AND attempts = 0
		AND finished_at IS NULL AND next_attempt_at <= now()`, d2))
	a = call(t, http.MethodPost, fmt.Sprintf("%s/v1/outbound/deliveries/%d/resend", b.url, d1), operatorToken, "")
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_deliveries WHERE id = $1 AND state = 'succeeded'`, d1))
	require.Equal(t, http.StatusNotFound, call(t, http.MethodPost, b.url+"/v1/outbound/deliveries/999999/resend", operatorToken, "").status)
	require.Equal(t, http.StatusBadRequest, call(t, http.MethodPost, b.url+"/v1/outbound/deliveries/x/resend", operatorToken, "").status)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'outbound_delivery_resend' AND target_id = $1
		AND reason = 'fixed their TLS'`, fmt.Sprint(d2)))

	// Re-send a message: whatever happened before (succeeded), and to an
	// endpoint that never had it.
	rs := fmt.Sprintf("%s/v1/outbound/messages/%d/resend", b.url, m1)
	a = call(t, http.MethodPost, rs, operatorToken, `{"endpoint_id":"`+id+`"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, float64(d1), a.body["id"])
	require.Equal(t, "pending", a.body["state"])
	a = call(t, http.MethodPost, rs, operatorToken, `{"endpoint_id":"`+other+`"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, other, a.body["endpoint_id"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbound_deliveries WHERE message_id = $1 AND endpoint_id = $2 AND state = 'pending'`, m1, other))
	require.Equal(t, http.StatusNotFound, call(t, http.MethodPost, rs, operatorToken, `{"endpoint_id":"`+uuid.NewString()+`"}`).status)
	require.Equal(t, http.StatusBadRequest, call(t, http.MethodPost, rs, operatorToken, `{"endpoint_id":"nope"}`).status)
	require.Equal(t, http.StatusNotFound, call(t, http.MethodPost, b.url+"/v1/outbound/messages/999999/resend", operatorToken, `{"endpoint_id":"`+id+`"}`).status)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'outbound_message_resend'`))

	// One message: its body and, per endpoint, the delivery and attempts.
	a = get(t, fmt.Sprintf("%s/v1/outbound/messages/%d", b.url, m1), viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "ev-1", a.body["event_id"])
	require.Equal(t, map[string]any{"event_id": "ev-1", "type": "payout.succeeded", "sequence": float64(1)}, a.body["body"])
	ds := a.body["deliveries"].([]any)
	require.Len(t, ds, 2)
	require.Len(t, ds[0].(map[string]any)["attempt_log"], 2)
	require.Len(t, ds[1].(map[string]any)["attempt_log"], 0)
	require.Equal(t, http.StatusNotFound, get(t, b.url+"/v1/outbound/messages/999999", viewerToken).status)

	// Messages: newest first, filtered, paged.
	ml := b.url + "/v1/outbound/messages"
	a = get(t, ml+"?user_id=u1", viewerToken)
	items = a.body["items"].([]any)
	require.Len(t, items, 2)
	require.Equal(t, float64(m2), items[0].(map[string]any)["id"])
	a = get(t, ml+"?event_type=refund.posted", viewerToken)
	require.Len(t, a.body["items"], 1)
	a = get(t, ml+"?event_id=ev-1", viewerToken)
	require.Len(t, a.body["items"], 1)
	a = get(t, ml+"?limit=2", viewerToken)
	require.Len(t, a.body["items"], 2)
	require.Equal(t, float64(m2), a.body["next_before_id"])
	a = get(t, fmt.Sprintf("%s?limit=2&before_id=%d", ml, m2), viewerToken)
	require.Len(t, a.body["items"], 1)
	require.Nil(t, a.body["next_before_id"])
	require.Equal(t, http.StatusBadRequest, get(t, ml+"?limit=0", viewerToken).status)
}
