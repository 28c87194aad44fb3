package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval/person"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/pspruns"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/jobs"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/otp"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/resolution"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	viewerToken   = "viewer-token-0123456789"
	operatorToken = "operator-token-0123456789"
)

var (
	t0  = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	now = t0.Add(5 * time.Hour)
)

type bundle struct {
	db  *pgtest.DB
	url string
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pgtest.New(t)
	return bundle{db: db, url: newServer(t, db, "alice:viewer:"+viewerToken+",bob:operator:"+operatorToken)}
}

func newServer(t *testing.T, db *pgtest.DB, tokenSpec string) string {
	t.Helper()
	return newServerWith(t, db, tokenSpec, "", fourEyesConfig{})
}

// fourEyesConfig is REQUIRE_SECOND_APPROVER, SECOND_APPROVER_THRESHOLD
// and SECOND_APPROVER_RESOLUTION_AMOUNT, wired as run.go wires them.
type fourEyesConfig struct {
	RequireSecondApprover bool
	Threshold             int
	ResolutionAmount      int64
}

// newServerWith is newServer with the four-eyes settings and the tokens'
// persons (DLQ_ADMIN_TOKEN_PERSONS).
func newServerWith(t *testing.T, db *pgtest.DB, tokenSpec, personSpec string, fourEyes fourEyesConfig) string {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	tokens, err := bearer.Parse(tokenSpec, api.Roles())
	require.NoError(t, err)
	persons, err := person.Parse(personSpec, tokens.Names())
	require.NoError(t, err)
	reg := httpserver.NewRegistry()
	r := httpserver.NewRouter(logger, reg)
	st := store.New(db.Pool)
	clock := func() time.Time { return now }
	rec, err := recon.New(db.Pool, discardAlerts{}, lifecycle.Deps{Logger: logger, Registerer: reg, Clock: clock})
	require.NoError(t, err)
	queue, err := jobs.InsertOnly(db.Pool, logger)
	require.NoError(t, err)
	deps := lifecycle.Deps{Logger: logger, Clock: clock}
	gate := approval.New(db.Pool, fourEyes.RequireSecondApprover, deps).WithPersons(persons)
	replays := replay.New(db.Pool, st, deps).WithJobs(queue).WithApproval(gate, fourEyes.Threshold)
	resolutions := resolution.New(db.Pool, deps).WithApproval(gate, fourEyes.ResolutionAmount)
	gate.Register(replay.ApprovalKind, replays.BulkApprovals()).Register(resolution.ApprovalKind, resolutions.Approvals())
	api.Mount(r, api.Deps{Logger: logger, Store: st, Payouts: payouts.New(db.Pool), Replay: replays, Recon: rec,
		PSPRuns: pspruns.New(db.Pool, queue), Resolutions: resolutions, Approvals: gate, Tokens: tokens, Now: clock,
		// No Paystack key: review/otp's own tests talk to the stand-in.
		OTP: &otp.Finalizer{Payouts: payouts.New(db.Pool), Pool: db.Pool, Now: clock}})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

// discardAlerts is a recon.Raiser that drops alerts (recon's own tests
// check them).
type discardAlerts struct{}

func (discardAlerts) Raise(context.Context, alert.Alert) {}

type answer struct {
	status int
	raw    string
	body   map[string]any
}

func (a answer) errorCode() string {
	e, _ := a.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func (a answer) errorMessage() string {
	e, _ := a.body["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

func get(t *testing.T, rawURL, token string) answer {
	t.Helper()
	return call(t, http.MethodGet, rawURL, token, "")
}

// call sends body (none when "") and checks the answer is JSON in the
// contract's shape.
func call(t *testing.T, method, rawURL, token, reqBody string) answer {
	t.Helper()
	var rd io.Reader
	if reqBody != "" {
		rd = strings.NewReader(reqBody)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	require.NoError(t, err)
	if reqBody != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(raw, &body), "every answer is JSON: %s", raw)
	if resp.StatusCode >= 400 {
		e, ok := body["error"].(map[string]any)
		require.True(t, ok, "error answers use the contract shape: %s", raw)
		require.NotEmpty(t, e["code"])
		require.NotEmpty(t, e["message"])
	}
	return answer{status: resp.StatusCode, raw: string(raw), body: body}
}

// insert stores a consumer letter; offset makes its origin unique.
func insert(t *testing.T, db *pgtest.DB, topic, class string, offset int64, failedAt time.Time, payload []byte, headers map[string]string) int64 {
	t.Helper()
	p := int32(1)
	id, ok, err := dlq.Insert(context.Background(), db.Pool, dlq.Letter{
		Source: dlq.SourceConsumer, OriginalTopic: topic, OriginalPartition: &p, OriginalOffset: &offset,
		ConsumerGroup: "payout-worker", PartitionKey: "user-1", EventType: "psp.event",
		Payload: payload, Headers: headers, Error: "no user_id in metadata", ErrorClass: class, RetryCount: 3,
		RetryHistory:   []dlq.Attempt{{At: failedAt, Error: "no user_id in metadata", Class: class}},
		FirstFailureAt: failedAt.Add(-time.Minute), FailedAt: failedAt, CorrelationID: "corr-1",
	})
	require.NoError(t, err)
	require.True(t, ok)
	return id
}

func (b bundle) seed(t *testing.T) []int64 {
	t.Helper()
	var out []int64
	for i, r := range []struct {
		topic, class string
	}{
		{kafkax.TopicTransactions, "permanent"},
		{kafkax.TopicWebhookPending, "transient"},
		{kafkax.TopicTransactions, "transient"},
		{kafkax.TopicSettlements, "permanent"},
		{kafkax.TopicTransactions, "permanent"},
	} {
		out = append(out, insert(t, b.db, r.topic, r.class, int64(i), t0.Add(time.Duration(i)*time.Hour), []byte(`{"n":1}`), nil))
	}
	_, err := b.db.Pool.Exec(context.Background(),
		`UPDATE dead_letters SET status = 'discarded', resolved_at = $2, resolved_by = 'bob', resolution_reason = 'duplicate' WHERE id = $1`,
		out[2], t0.Add(10*time.Hour))
	require.NoError(t, err)
	return out
}

func itemIDs(t *testing.T, a answer) []int64 {
	t.Helper()
	items, ok := a.body["items"].([]any)
	require.True(t, ok, "items is a list: %s", a.raw)
	out := []int64{}
	for _, it := range items {
		out = append(out, int64(it.(map[string]any)["id"].(float64)))
	}
	return out
}

func TestEveryV1RouteNeedsAToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.seed(t)
	paths := []string{"/v1/dead-letters", "/v1/dead-letters/stats", fmt.Sprintf("/v1/dead-letters/%d", id[0]), "/v1/no-such-route"}
	for _, p := range paths {
		for _, tok := range []string{"", "wrong-token-0123456789", viewerToken + "x"} {
			a := get(t, b.url+p, tok)
			require.Equal(t, http.StatusUnauthorized, a.status, "%s with %q", p, tok)
			require.Equal(t, "unauthorized", a.errorCode())
		}
	}
	for _, tok := range []string{viewerToken, operatorToken} {
		for _, p := range paths[:3] {
			require.Equal(t, http.StatusOK, get(t, b.url+p, tok).status, p)
		}
	}

	// No tokens configured: everyone is refused.
	closed := newServer(t, b.db, "")
	a := get(t, closed+"/v1/dead-letters", viewerToken)
	require.Equal(t, http.StatusUnauthorized, a.status)
	require.Equal(t, "unauthorized", a.errorCode())

	// Operational endpoints stay open.
	req, err := http.Get(b.url + "/healthz")
	require.NoError(t, err)
	require.NoError(t, req.Body.Close())
	require.Equal(t, http.StatusOK, req.StatusCode)
}

func TestListFiltersAndPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.seed(t)

	list := func(q url.Values) answer {
		t.Helper()
		a := get(t, b.url+"/v1/dead-letters?"+q.Encode(), viewerToken)
		require.Equal(t, http.StatusOK, a.status, a.raw)
		return a
	}
	cases := []struct {
		query url.Values
		want  []int64
	}{
		{url.Values{}, []int64{id[4], id[3], id[2], id[1], id[0]}},
		{url.Values{"topic": {kafkax.TopicTransactions}}, []int64{id[4], id[2], id[0]}},
		{url.Values{"status": {"open"}}, []int64{id[4], id[3], id[1], id[0]}},
		{url.Values{"status": {"discarded"}}, []int64{id[2]}},
		{url.Values{"error_class": {"transient"}}, []int64{id[2], id[1]}},
		{url.Values{"since": {t0.Add(time.Hour).Format(time.RFC3339)}}, []int64{id[4], id[3], id[2], id[1]}},
		{url.Values{"until": {t0.Add(2 * time.Hour).Format(time.RFC3339)}}, []int64{id[1], id[0]}},
		// Empty values are no filter, as in the contract's URL template.
		{url.Values{"topic": {""}, "status": {""}, "error_class": {""}, "since": {""}, "until": {""}, "limit": {""}, "cursor": {""}},
			[]int64{id[4], id[3], id[2], id[1], id[0]}},
	}
	for _, tc := range cases {
		a := list(tc.query)
		require.Equal(t, tc.want, itemIDs(t, a), "%v", tc.query)
		require.Equal(t, "", a.body["next_cursor"], "the last page says so with an empty cursor")
	}

	// Pages of 2 walk every row once, although new rows arrive meanwhile.
	var seen []int64
	q := url.Values{"limit": {"2"}}
	for page := 0; ; page++ {
		require.Less(t, page, 10)
		a := list(q)
		seen = append(seen, itemIDs(t, a)...)
		next, _ := a.body["next_cursor"].(string)
		if next == "" {
			break
		}
		insert(t, b.db, kafkax.TopicTransactions, "transient", int64(100+page), now, []byte(`{}`), nil)
		q.Set("cursor", next)
	}
	require.Equal(t, []int64{id[4], id[3], id[2], id[1], id[0]}, seen)

	// Item shape: snake_case, payload left out.
	a := list(url.Values{"status": {"discarded"}})
	item := a.body["items"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "source", "original_topic", "original_partition", "original_offset", "consumer_group",
		"error", "error_class", "retry_count", "correlation_id", "status", "resolved_by", "resolved_at",
		"resolution_reason", "first_failure_at", "failed_at", "payload_bytes"} {
		require.Contains(t, item, k)
	}
	require.NotContains(t, item, "payload")
	require.Equal(t, "bob", item["resolved_by"])
	require.Equal(t, "duplicate", item["resolution_reason"])
	require.Equal(t, t0.Add(2*time.Hour).Format(time.RFC3339), item["failed_at"])
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.seed(t)
	cases := []struct {
		path, param string
		status      int
	}{
		{"/v1/dead-letters?status=pending", "status", 400},
		{"/v1/dead-letters?since=yesterday", "since", 400},
		{"/v1/dead-letters?until=2026-11-20", "until", 400},
		{"/v1/dead-letters?since=2026-11-21T00:00:00Z&until=2026-11-20T00:00:00Z", "until", 400},
		{"/v1/dead-letters?limit=0", "limit", 400},
		{"/v1/dead-letters?limit=501", "limit", 400},
		{"/v1/dead-letters?limit=ten", "limit", 400},
		{"/v1/dead-letters?cursor=%21%21%21", "cursor", 400},
		{"/v1/dead-letters/abc", "id", 400},
		{"/v1/dead-letters/-3", "id", 400},
		{fmt.Sprintf("/v1/dead-letters/%d", id[4]+1000), "", 404},
	}
	for _, tc := range cases {
		a := get(t, b.url+tc.path, viewerToken)
		require.Equal(t, tc.status, a.status, "%s: %s", tc.path, a.raw)
		if tc.status == 400 {
			require.Equal(t, "invalid_request", a.errorCode())
			require.Contains(t, a.errorMessage(), tc.param, "the message names the parameter")
		} else {
			require.Equal(t, "not_found", a.errorCode())
		}
	}
}

func TestDetailRedactsButKeepsTheStoredRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	payload := []byte(`{"provider":"paystack","event_id":"evt_1","type":"transfer.failed","account_number":"0123456789",` +
		`"raw":{"event":"transfer.failed","data":{"recipient":{"details":{"bank_code":"058","iban":"GB82WEST12345698765432"}},` +
		`"card":{"number":"4242424242424242","cvv":"123"},"authorization":{"authorization_code":"AUTH_8dfhjjdt"},` +
		`"customer":{"email":"a@example.com"}}}}`)
	headers := map[string]string{"correlation_id": "corr-1", "Authorization": "Bearer sk_live_abcdefabcdef", "x-paystack-signature": "deadbeefcafe"}
	id := insert(t, b.db, kafkax.TopicWebhookPending, "permanent", 7, t0, payload, headers)

	// A viewer sees neither credentials nor personal data.
	a := get(t, fmt.Sprintf("%s/v1/dead-letters/%d", b.url, id), viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	for _, secret := range []string{"0123456789", "4242424242424242", "GB82WEST12345698765432", "AUTH_8dfhjjdt", "sk_live_abcdefabcdef", "deadbeefcafe", `"123"`, "a@example.com"} {
		require.NotContains(t, a.raw, secret)
	}
	require.Equal(t, "json", a.body["payload_encoding"])
	p := a.body["payload"].(map[string]any)
	require.Equal(t, "[REDACTED]", p["account_number"])
	require.Equal(t, "evt_1", p["event_id"], "the rest of the payload is shown")
	raw := p["raw"].(map[string]any)["data"].(map[string]any)
	require.Equal(t, "[REDACTED]", raw["card"])
	require.Equal(t, "[REDACTED]", raw["customer"].(map[string]any)["email"])

	// An operator sees the stored payload, personal data and bank details
	// included; credentials and card data stay hidden.
	op := get(t, fmt.Sprintf("%s/v1/dead-letters/%d", b.url, id), operatorToken)
	require.Equal(t, http.StatusOK, op.status, op.raw)
	for _, shown := range []string{"0123456789", "GB82WEST12345698765432", "a@example.com"} {
		require.Contains(t, op.raw, shown)
	}
	for _, secret := range []string{"4242424242424242", "AUTH_8dfhjjdt", "sk_live_abcdefabcdef", "deadbeefcafe", `"123"`} {
		require.NotContains(t, op.raw, secret)
	}
	h := a.body["headers"].(map[string]any)
	require.Equal(t, "[REDACTED]", h["Authorization"])
	require.Equal(t, "[REDACTED]", h["x-paystack-signature"])
	require.Equal(t, "corr-1", h["correlation_id"])

	// The detail carries everything an operator needs.
	for k, want := range map[string]any{
		"id": float64(id), "source": "consumer", "original_topic": kafkax.TopicWebhookPending,
		"original_partition": float64(1), "original_offset": float64(7), "consumer_group": "payout-worker",
		"error": "no user_id in metadata", "error_class": "permanent", "retry_count": float64(3),
		"correlation_id": "corr-1", "status": "open", "resolved_by": nil, "resolved_at": nil, "resolution_reason": nil,
		"first_failure_at": t0.Add(-time.Minute).Format(time.RFC3339), "failed_at": t0.Format(time.RFC3339),
	} {
		require.Equal(t, want, a.body[k], k)
	}
	history := a.body["retry_history"].([]any)
	require.Len(t, history, 1)
	require.Equal(t, "no user_id in metadata", history[0].(map[string]any)["error"])

	// Replay needs the original: the row is untouched.
	var stored []byte
	var storedHeaders string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT payload, headers::text FROM dead_letters WHERE id = $1", id).Scan(&stored, &storedHeaders))
	require.Equal(t, payload, stored)
	require.Contains(t, string(stored), "0123456789")
	require.Contains(t, string(stored), "4242424242424242")
	require.Contains(t, storedHeaders, "sk_live_abcdefabcdef")
}

func TestDetailOfABinaryPayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	payload := []byte{0xff, 0x00, 'n', 'o', 't', ' ', 'j', 's', 'o', 'n'}
	id := insert(t, b.db, kafkax.TopicTransactions, "permanent", 1, t0, payload, nil)
	a := get(t, fmt.Sprintf("%s/v1/dead-letters/%d", b.url, id), operatorToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "base64", a.body["payload_encoding"])
	require.Equal(t, map[string]any{"base64": base64.StdEncoding.EncodeToString(payload)}, a.body["payload"])
	require.Equal(t, map[string]any{}, a.body["headers"])

	// Not JSON cannot be redacted by key: a viewer does not get it at all.
	v := get(t, fmt.Sprintf("%s/v1/dead-letters/%d", b.url, id), viewerToken)
	require.Equal(t, http.StatusOK, v.status, v.raw)
	require.Equal(t, "hidden", v.body["payload_encoding"])
	require.NotContains(t, v.raw, base64.StdEncoding.EncodeToString(payload))
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seed(t)
	a := get(t, b.url+"/v1/dead-letters/stats", viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.JSONEq(t, `{
		"as_of": "2026-11-20T15:00:00Z",
		"by_status": {"open": 4, "replayed": 0, "discarded": 1},
		"oldest_open_age_seconds": 18000,
		"topics": [
			{"topic": "aegis.settlements", "by_status": {"open": 1, "replayed": 0, "discarded": 0}, "oldest_open_age_seconds": 7200},
			{"topic": "aegis.transactions", "by_status": {"open": 2, "replayed": 0, "discarded": 1}, "oldest_open_age_seconds": 18000},
			{"topic": "aegis.webhook.pending", "by_status": {"open": 1, "replayed": 0, "discarded": 0}, "oldest_open_age_seconds": 14400}
		]
	}`, a.raw)

	empty := get(t, newServer(t, pgtest.New(t), "alice:viewer:"+viewerToken)+"/v1/dead-letters/stats", viewerToken)
	require.Equal(t, http.StatusOK, empty.status)
	require.Nil(t, empty.body["oldest_open_age_seconds"])
	require.Equal(t, []any{}, empty.body["topics"])
	require.True(t, strings.HasPrefix(empty.raw, "{"))
}
