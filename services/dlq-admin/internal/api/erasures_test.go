package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/api"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/erasure"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/resolution"
)

// The erasure key of these tests (ERASURE_KEY).
var erasureKey = []byte("test-erasure-key-0123456789abcdef0123")

// endUser is one end user's personal data as the PSPs send it, each value
// distinctive enough that finding it anywhere means it was not erased.
type endUser struct {
	// tag makes the PSP's ids of the user's objects unique (they do not
	// carry the platform's user id).
	tag, userID, name, first, last, email, phone, fingerprint, line1 string
}

// values are what must be gone after the person's erasure.
func (p endUser) values() map[string]string {
	return map[string]string{"user id": p.userID, "name": p.name, "first name": p.first, "last name": p.last,
		"email": p.email, "phone": p.phone, "card fingerprint": p.fingerprint, "address": p.line1}
}

var (
	zephyrine = endUser{tag: "1zq", userID: "usr_zq7f3a9c2e", name: "Zephyrine Quillfeather", first: "Zephyrine", last: "Quillfeather",
		email: "zephyrine.q@example.org", phone: "+447700900123", fingerprint: "Fp9QzX7wLmK2vR4t", line1: "17 Larkspur Crescent"}
	bartholomew = endUser{tag: "2bo", userID: "usr_bo51d0e8aa", name: "Bartholomew Oakenshield", first: "Bartholomew", last: "Oakenshield",
		email: "b.oakenshield@example.net", phone: "+15555550199", fingerprint: "Kt3WnB8sYpQ1dZ6e", line1: "88 Juniper Hollow"}
)

// erasureServer is dlq-admin's API as run.go wires it for erasures, on a
// pool of dlq-admin's own role (after the contract step: the grants the
// role keeps), its log lines written to logs.
func erasureServer(t *testing.T, db *pgtest.DB, logs *syncBuffer) string {
	t.Helper()
	db.AfterContract(t)
	pool := db.As(t, migrations.RoleDLQAdmin)
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tokens, err := bearer.Parse("alice:viewer:"+viewerToken+",bob:operator:"+operatorToken+",carol:operator:"+secondOperatorToken, api.Roles())
	require.NoError(t, err)
	reg := httpserver.NewRegistry()
	r := httpserver.NewRouter(logger, reg)
	st := store.New(pool)
	deps := lifecycle.Deps{Logger: logger, Clock: func() time.Time { return now }}
	// Four-eyes is off for everything else: an erasure waits for a second
	// person regardless.
	gate := approval.New(pool, false, deps)
	replays := replay.New(pool, st, deps).WithApproval(gate, 100)
	resolutions := resolution.New(pool, deps).WithApproval(gate, 0)
	erasures := erasure.New(pool, gate, erasureKey, deps)
	gate.Register(replay.ApprovalKind, replays.BulkApprovals()).Register(resolution.ApprovalKind, resolutions.Approvals()).
		Register(erasure.ApprovalKind, erasures.Approvals())
	api.Mount(r, api.Deps{Logger: logger, Store: st, Payouts: payouts.New(pool), Replay: replays, Resolutions: resolutions,
		Approvals: gate, Erasures: erasures, Tokens: tokens, Now: func() time.Time { return now }})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stripeEvent is a Stripe payment_intent.succeeded as Stripe sends it, with
// the charge's billing details and card.
func (p endUser) stripeEvent(eventID string, amount int64) map[string]any {
	return map[string]any{
		"id": eventID, "object": "event", "type": "payment_intent.succeeded", "created": 1764000000, "livemode": false,
		"data": map[string]any{"object": map[string]any{
			"id": "pi_" + eventID, "object": "payment_intent", "amount": amount, "amount_received": amount, "currency": "usd",
			"status": "succeeded", "receipt_email": p.email, "description": "Top-up by " + p.name,
			"metadata": map[string]any{"user_id": p.userID, "customer_note": "call " + p.phone},
			"shipping": map[string]any{"name": p.name, "phone": p.phone, "address": map[string]any{"line1": p.line1, "city": "Leeds"}},
			"latest_charge": map[string]any{
				"id": "ch_" + eventID, "object": "charge", "amount": amount,
				"billing_details": map[string]any{"name": p.name, "email": p.email, "phone": p.phone,
					"address": map[string]any{"line1": p.line1, "postal_code": "LS9 8QT", "country": "GB"}},
				"payment_method_details": map[string]any{"type": "card", "card": map[string]any{
					"brand": "visa", "last4": "4242", "fingerprint": p.fingerprint, "exp_month": 12, "exp_year": 2030}},
			},
		}},
	}
}

// paystackEvent is a Paystack charge.success with its customer and
// authorization.
func (p endUser) paystackEvent(reference string, amount int64) map[string]any {
	return map[string]any{
		"event": "charge.success",
		"data": map[string]any{
			"id": 4099260516, "reference": reference, "amount": amount, "currency": "NGN", "status": "success",
			"metadata": map[string]any{"user_id": p.userID},
			"customer": map[string]any{"id": 1, "customer_code": "CUS_x1", "first_name": p.first, "last_name": p.last,
				"email": p.email, "phone": p.phone},
			"authorization": map[string]any{"authorization_code": "AUTH_x1", "bin": "408408", "last4": "4081",
				"signature": p.fingerprint, "account_name": p.name},
		},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// seeded is what seed wrote for one user.
type seeded struct {
	payoutID string
	letterID int64
}

// seed writes p's personal data into every table that can hold it, as
// each writer writes it: PSP events and their outbox rows, a dead letter,
// a wallet credited and paid out to zero (ledger), a finished payout with
// its destination, a resolution, the settlement event delivered to an
// endpoint, the credit's availability, a refund, and operators' free text.
// With balance > 0 the wallet keeps that much.
func seed(t *testing.T, db *pgtest.DB, p endUser, balance int64) seeded {
	t.Helper()
	ctx := context.Background()
	pool := db.Pool
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, q, args...)
		require.NoError(t, err, q)
	}
	stripe := mustJSON(t, p.stripeEvent("evt_"+p.tag, 5000))
	paystack := mustJSON(t, p.paystackEvent("ref_"+p.tag, 700000))
	// webhook-api's ingest: the event with its extracted columns and raw body.
	exec(`INSERT INTO webhook_events (provider, event_id, event_type, object_id, user_id, amount, currency, occurred_at, payload, correlation_id)
		VALUES ('stripe', $1, 'payment_intent.succeeded', $2, $3, 5000, 'usd', now(), $4, 'corr-1'),
		       ('paystack', $5, 'charge.success', $5, $3, 700000, 'ngn', now(), $6, 'corr-2')`,
		"evt_"+p.tag, "pi_evt_"+p.tag, p.userID, stripe, "ref_"+p.tag, paystack)
	// Its aegis.webhook.pending envelope, published and kept for retention.
	envelope := mustJSON(t, map[string]any{"provider": "stripe", "event_id": "evt_" + p.tag, "type": "payment_intent.succeeded",
		"action": "credit", "user_id": p.userID, "amount": 5000, "currency": "usd", "occurred_at": now, "raw": json.RawMessage(stripe)})
	exec(`INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers, status, finished_at)
		VALUES ($1, 'payment_intent.succeeded', $2, $3, '{"aegis-event-proof":"v1,abc"}', 'processed', now())`,
		kafkax.TopicWebhookPending, p.userID, envelope)
	// The same envelope dead-lettered, then discarded by an operator whose
	// reason quotes the customer (through the API below).
	letter := fixture.DeadLetter{OriginalTopic: kafkax.TopicWebhookPending, ConsumerGroup: "payout-worker", PartitionKey: p.userID,
		EventType: "payment_intent.succeeded", Payload: envelope, Headers: map[string]string{"aegis-event-proof": "v1,abc"},
		Error: "wallet lock lost for " + p.userID, RetryHistory: []dlq.Attempt{{Error: "timeout crediting " + p.userID}}}.Insert(t, pool)

	// The ledger: the credit, then a payout's hold of all but balance.
	fixture.Credit(p.userID, 5000, "stripe:pi_evt_"+p.tag).Insert(t, pool)
	payoutID := fixture.Payout{UserID: p.userID, Amount: 5000 - balance, Status: payoutstate.Succeeded,
		Destination: "acct_" + p.tag, ExternalAccount: "ba_" + p.tag, PSPReference: "po_" + p.tag,
		LastError: "first attempt: card of " + p.email + " declined"}.Insert(t, pool)
	if balance < 5000 {
		fixture.Hold(payoutID, p.userID, 5000-balance).Insert(t, pool)
		fixture.Posting{Kind: fixture.LedgerSettle, Reference: payoutID, From: fixture.System(fixture.PayoutHolds),
			To: fixture.System(fixture.PSPClearing), Amount: 5000 - balance}.Insert(t, pool)
	}
	exec(`INSERT INTO credit_availability (reference, user_id, currency, amount, available_at) VALUES ($1, $2, 'usd', 5000, now())`,
		"stripe:pi_evt_"+p.tag, p.userID)
	exec(`INSERT INTO payment_returns (provider, object_id, kind, payment_reference, user_id, currency, amount, state, last_event_id)
		VALUES ('stripe', $1, 'refund', $2, $3, 'usd', 100, 'refunded', $4)`, "re_"+p.tag, "pi_evt_"+p.tag, p.userID, "evt_re_"+p.tag)
	exec(`INSERT INTO destinations (id, user_id, provider, destination, type, created_by, external_account, currency, psp_record)
		VALUES (gen_random_uuid(), $1, 'stripe', $2, 'connected_account', 'shop', $3, 'usd', '{"object":"account","country":"GB","status":"enabled"}')`,
		p.userID, "acct_"+p.tag, "ba_"+p.tag)
	fixture.Resolution{PayoutID: payoutID, UserID: p.userID, Status: "applied", Outcome: "paid",
		Reason: "confirmed with " + p.name + " by phone " + p.phone, RequestedBy: "bob"}.Insert(t, pool)

	// The settlement event, its delivery to an endpoint and the receiver's answer.
	body := mustJSON(t, map[string]any{"schema_version": "1", "event_id": "payout:" + payoutID + ":SUCCEEDED", "type": "payout.succeeded",
		"user_id": p.userID, "amount": 5000 - balance, "currency": "usd", "payout_id": payoutID, "status": "SUCCEEDED"})
	var endpointID string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbound_endpoints (url, secret, created_by) VALUES ('https://platform.example.com/aegis', 'whsec_x', 'bob') RETURNING id::text`).Scan(&endpointID))
	var messageID, deliveryID int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbound_messages (event_id, event_type, user_id, sequence, occurred_at, body)
		VALUES ($1, 'payout.succeeded', $2, 1, now(), $3) RETURNING id`, "payout:"+payoutID+":SUCCEEDED", p.userID, body).Scan(&messageID))
	exec(`INSERT INTO outbound_user_sequences (user_id, last) VALUES ($1, 1)`, p.userID)
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbound_deliveries (message_id, endpoint_id, state, last_error, finished_at)
		VALUES ($1, $2, 'failed', $3, now()) RETURNING id`, messageID, endpointID, "receiver said: unknown customer "+p.email).Scan(&deliveryID))
	exec(`INSERT INTO outbound_attempts (delivery_id, message_id, endpoint_id, attempt, outcome, latency_ms, attempted_at, response_body, error)
		VALUES ($1, $2, $3, 1, 'failed', 12, now(), $4, $5)`, deliveryID, messageID, endpointID,
		`{"error":"no customer `+p.email+`"}`, "422 for "+p.userID)
	// Operators' earlier free text about the user.
	exec(`INSERT INTO audit_log (actor, action, target_type, target_id, reason, detail)
		VALUES ('bob', 'note', 'user', $1, $2, $3)`, p.userID, "ticket from "+p.email, mustJSON(t, map[string]any{"user_id": p.userID, "name": p.name}))
	return seeded{payoutID: payoutID, letterID: letter}
}

// occurrences counts, in every text, varchar, jsonb, json, bytea and text
// array column of every table of the public schema, the rows holding
// value (case-insensitively); the answer names each column that does.
func occurrences(t *testing.T, pool *pgxpool.Pool, value string) map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT c.table_name, c.column_name, c.data_type
		FROM information_schema.columns c JOIN information_schema.tables tb USING (table_schema, table_name)
		WHERE c.table_schema = 'public' AND tb.table_type = 'BASE TABLE'
		  AND c.data_type IN ('text', 'character varying', 'character', 'jsonb', 'json', 'bytea', 'ARRAY')
		ORDER BY 1, 2`)
	require.NoError(t, err)
	type col struct{ table, column, kind string }
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (col, error) {
		var c col
		return c, r.Scan(&c.table, &c.column, &c.kind)
	})
	require.NoError(t, err)
	require.Greater(t, len(cols), 100, "the scan reads the whole schema")
	out := map[string]int{}
	for _, c := range cols {
		expr := fmt.Sprintf("%q::text", c.column)
		switch c.kind {
		case "bytea":
			expr = fmt.Sprintf("encode(%q, 'escape')", c.column)
		case "ARRAY":
			expr = fmt.Sprintf("array_to_string(%q::text[], ' ')", c.column)
		}
		var n int
		require.NoError(t, pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q WHERE strpos(lower(%s), lower($1)) > 0`,
			c.table, expr), value).Scan(&n), "%s.%s", c.table, c.column)
		if n > 0 {
			out[c.table+"."+c.column] = n
		}
	}
	return out
}

// userRows is every row that names userID in the tables keyed by user, as
// JSON: what must not change when someone else is erased.
func userRows(t *testing.T, pool *pgxpool.Pool, userID string) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT jsonb_build_object(
		'webhook_events', (SELECT jsonb_agg(to_jsonb(x) ORDER BY id) FROM webhook_events x WHERE user_id = $1),
		'payouts', (SELECT jsonb_agg(to_jsonb(x) ORDER BY id) FROM payouts x WHERE user_id = $1),
		'destinations', (SELECT jsonb_agg(to_jsonb(x) ORDER BY id) FROM destinations x WHERE user_id = $1),
		'wallets', (SELECT jsonb_agg(to_jsonb(x) ORDER BY id) FROM wallets x WHERE owner = $1),
		'outbox', (SELECT jsonb_agg(to_jsonb(x) ORDER BY id) FROM transaction_outbox x WHERE partition_key = $1),
		'dead_letters', (SELECT jsonb_agg(to_jsonb(x) ORDER BY id) FROM dead_letters x WHERE partition_key = $1),
		'messages', (SELECT jsonb_agg(to_jsonb(x) ORDER BY id) FROM outbound_messages x WHERE user_id = $1),
		'resolutions', (SELECT jsonb_agg(to_jsonb(x) ORDER BY id) FROM payout_resolutions x WHERE user_id = $1),
		'returns', (SELECT jsonb_agg(to_jsonb(x) ORDER BY object_id) FROM payment_returns x WHERE user_id = $1),
		'credits', (SELECT jsonb_agg(to_jsonb(x) ORDER BY reference) FROM credit_availability x WHERE user_id = $1))::text`,
		userID).Scan(&s))
	var tables map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(s), &tables))
	for name, rows := range tables {
		require.NotEqual(t, "null", string(rows), "%s holds rows of %s", name, userID)
	}
	return s
}

// ledgerState is every wallet's balance and owed, by wallet id, and the
// sum of its entries, with the ledger's row counts.
func ledgerState(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT jsonb_build_object(
		'wallets', (SELECT jsonb_object_agg(w.id, jsonb_build_array(w.kind, w.currency, w.balance, w.owed,
			(SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e WHERE e.wallet_id = w.id))) FROM wallets w),
		'transactions', (SELECT count(*) FROM ledger_transactions),
		'entries', (SELECT count(*) FROM ledger_entries),
		'sum', (SELECT coalesce(sum(amount), 0) FROM ledger_entries))::text`).Scan(&s))
	return s
}

// The erasure of one user through the API with two operators: afterwards
// none of the person's data (their name, email, phone, card fingerprint,
// address, nor the user id) is in any text, jsonb or bytea column of any
// table; the other user's data is as it was; the ledger's balances and
// sums have not moved; the audit log records it by pseudonym; the
// requester cannot approve it; and nothing was logged about the person.
func TestEraseUserLeavesNoPersonalDataAnywhere(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	logs := &syncBuffer{}
	url := erasureServer(t, db, logs)
	ctx := context.Background()

	mine := seed(t, db, zephyrine, 0)
	other := seed(t, db, bartholomew, 1200)
	// Each operator's discard reason quotes its customer, as people do.
	for _, s := range []struct {
		letter int64
		who    endUser
	}{{mine.letterID, zephyrine}, {other.letterID, bartholomew}} {
		a := call(t, http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/discard", url, s.letter), operatorToken,
			string(mustJSON(t, map[string]string{"reason": "duplicate credit; " + s.who.name + " was credited by hand"})))
		require.Equal(t, http.StatusOK, a.status, a.raw)
	}

	for what, v := range zephyrine.values() {
		require.NotEmpty(t, occurrences(t, db.Pool, v), "the seed holds the %s", what)
	}
	otherBefore := map[string]map[string]int{}
	for what, v := range bartholomew.values() {
		otherBefore[what] = occurrences(t, db.Pool, v)
		require.NotEmpty(t, otherBefore[what], "the seed holds the other user's %s", what)
	}
	ledgerBefore := ledgerState(t, db.Pool)
	otherRowsBefore := userRows(t, db.Pool, bartholomew.userID)
	var walletIDs []int64
	rows, err := db.Pool.Query(ctx, `SELECT id FROM wallets WHERE kind = 'user' AND owner = $1 ORDER BY id`, zephyrine.userID)
	require.NoError(t, err)
	walletIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.NotEmpty(t, walletIDs)

	request := func(token, userID, reason string) answer {
		return call(t, http.MethodPost, url+"/v1/erasures", token, string(mustJSON(t, map[string]string{"user_id": userID, "reason": reason})))
	}
	a := request(viewerToken, zephyrine.userID, "GDPR ticket 4411")
	require.Equal(t, http.StatusForbidden, a.status, a.raw)
	a = request(operatorToken, "usr_nobody", "GDPR ticket 4411")
	require.Equal(t, http.StatusNotFound, a.status, a.raw)
	require.Equal(t, "unknown_user", a.errorCode())
	a = request(operatorToken, zephyrine.userID, "erase "+zephyrine.userID)
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)
	require.Contains(t, a.errorMessage(), "reason")

	a = request(operatorToken, zephyrine.userID, "GDPR ticket 4411")
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	er := a.body["erasure"].(map[string]any)
	ap := a.body["approval"].(map[string]any)
	pseudonym := er["pseudonym"].(string)
	require.Equal(t, erasure.Pseudonym(erasureKey, zephyrine.userID), pseudonym)
	require.Equal(t, "pending", er["status"])
	require.Equal(t, "user_erasure", ap["kind"])
	require.Equal(t, pseudonym, ap["target_id"])
	approvalID := int64(ap["id"].(float64))
	require.NotContains(t, a.raw, zephyrine.userID, "the answer names the pseudonym only")
	require.Equal(t, http.StatusConflict, request(operatorToken, zephyrine.userID, "again").status, "one pending erasure per user")
	require.NotEmpty(t, occurrences(t, db.Pool, zephyrine.email), "nothing is erased before a second endUser approves")

	// Four eyes: the requester cannot approve their own erasure.
	a = call(t, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/approve", url, approvalID), operatorToken, "")
	require.Equal(t, http.StatusForbidden, a.status, a.raw)
	require.NotEmpty(t, occurrences(t, db.Pool, zephyrine.email))

	a = call(t, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/approve", url, approvalID), secondOperatorToken, `{"reason":"checked the ticket"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "approved", a.body["status"])
	require.Equal(t, pseudonym, a.body["result_id"])

	for what, v := range zephyrine.values() {
		require.Empty(t, occurrences(t, db.Pool, v), "the erased user's %s (%q) is still stored", what, v)
	}
	for what, v := range bartholomew.values() {
		require.Equal(t, otherBefore[what], occurrences(t, db.Pool, v), "the other user's %s changed", what)
	}
	require.Equal(t, ledgerBefore, ledgerState(t, db.Pool), "balances, entries and sums do not move")
	require.Equal(t, otherRowsBefore, userRows(t, db.Pool, bartholomew.userID), "the other user's rows are as they were")
	var owned int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM wallets WHERE kind = 'user' AND owner = $1 AND id = ANY($2)`,
		pseudonym, walletIDs).Scan(&owned))
	require.Equal(t, len(walletIDs), owned, "the user's wallets keep their ids under the pseudonym")
	var payoutUser, webhookUser string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT user_id FROM payouts WHERE id = $1`, mine.payoutID).Scan(&payoutUser))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT user_id FROM webhook_events WHERE event_id = $1`, "evt_"+zephyrine.tag).Scan(&webhookUser))
	require.Equal(t, pseudonym, payoutUser)
	require.Equal(t, pseudonym, webhookUser)
	var amount int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (payload->'data'->'object'->>'amount')::bigint FROM webhook_events WHERE event_id = $1`,
		"evt_"+zephyrine.tag).Scan(&amount))
	require.EqualValues(t, 5000, amount, "the raw body keeps its amounts")
	var active int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM destinations WHERE user_id = $1 AND status = 'active'`, pseudonym).Scan(&active))
	require.Zero(t, active, "no payout may go to an erased user's destination again")

	// The audit rows: the request and the erasure, by pseudonym, by the two
	// operators; and the erasure recorded for a later PSP event.
	var audited int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE target_type = 'user' AND target_id = $1
		AND ((action = 'erasure_request' AND actor = 'bob') OR (action = 'erase' AND actor = 'carol' AND detail->>'requested_by' = 'bob'))`,
		pseudonym).Scan(&audited))
	require.Equal(t, 2, audited)
	g := get(t, fmt.Sprintf("%s/v1/erasures/%v", url, er["id"]), viewerToken)
	require.Equal(t, http.StatusOK, g.status, g.raw)
	require.Equal(t, "erased", g.body["status"])
	require.Equal(t, "carol", g.body["approved_by"])
	require.NotNil(t, g.body["rows"])

	for _, v := range zephyrine.values() {
		require.NotContains(t, logs.String(), v, "dlq-admin logged the endUser's data")
	}
	require.Equal(t, http.StatusNotFound, request(operatorToken, zephyrine.userID, "GDPR ticket 4412").status,
		"nothing is left under the user id")
}

// An erasure is refused, recording nothing, while money is held or on its
// way: a balance, an unfinished payout, an open dead letter; and an
// approval of one whose money arrived after the request fails and stays
// pending.
func TestEraseUserRefusedWhileMoneyIsHeld(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	url := erasureServer(t, db, &syncBuffer{})
	ctx := context.Background()
	request := func(userID string) answer {
		return call(t, http.MethodPost, url+"/v1/erasures", operatorToken,
			string(mustJSON(t, map[string]string{"user_id": userID, "reason": "GDPR ticket 7"})))
	}
	refused := func(userID, says string) {
		t.Helper()
		a := request(userID)
		require.Equal(t, http.StatusConflict, a.status, a.raw)
		require.Equal(t, "erasure_refused", a.errorCode())
		require.Contains(t, a.errorMessage(), says)
	}

	fixture.Wallet{Owner: "usr_rich", Balance: 900}.Insert(t, db.Pool)
	refused("usr_rich", "money")

	fixture.Wallet{Owner: "usr_paying", Balance: 0}.Insert(t, db.Pool)
	fixture.Payout{UserID: "usr_paying", Status: payoutstate.Awaiting}.Insert(t, db.Pool)
	refused("usr_paying", "payout")

	fixture.Wallet{Owner: "usr_letter"}.Insert(t, db.Pool)
	fixture.DeadLetter{OriginalTopic: kafkax.TopicWebhookPending, PartitionKey: "usr_letter",
		Payload: []byte(`{"provider":"stripe","event_id":"evt_l","user_id":"usr_letter","amount":100,"currency":"usd"}`)}.Insert(t, db.Pool)
	refused("usr_letter", "dead letter")

	// Another user's open letter that quotes the user: a replay must
	// publish it unchanged, so it is closed first.
	fixture.Wallet{Owner: "usr_quoted"}.Insert(t, db.Pool)
	fixture.DeadLetter{PartitionKey: "usr_someone",
		Payload: []byte(`{"payout_id":"p","user_id":"usr_someone","note":"same card as usr_quoted"}`)}.Insert(t, db.Pool)
	refused("usr_quoted", "dead letter")

	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM erasures) + (SELECT count(*) FROM approvals)
		+ (SELECT count(*) FROM audit_log)`).Scan(&n))
	require.Zero(t, n, "a refused request records nothing")

	// Money arrives between the request and its approval.
	fixture.Wallet{Owner: "usr_late"}.Insert(t, db.Pool)
	a := request("usr_late")
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	approvalID := int64(a.body["approval"].(map[string]any)["id"].(float64))
	fixture.Credit("usr_late", 300, "stripe:pi_late").Insert(t, db.Pool)
	a = call(t, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/approve", url, approvalID), secondOperatorToken, "")
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Equal(t, "erasure_refused", a.errorCode())
	var owner, status string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT w.owner, ap.status FROM wallets w, approvals ap
		WHERE w.owner = 'usr_late' AND ap.id = $1`, approvalID).Scan(&owner, &status))
	require.Equal(t, "pending", status, "the approval waits: reject it or approve once the money is out")

	// Rejecting forgets the user id.
	a = call(t, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/reject", url, approvalID), operatorToken, `{"reason":"money arrived"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM erasures WHERE user_id IS NOT NULL OR status <> 'rejected'`).Scan(&n))
	require.Zero(t, n)
}

// An erasure waits for a second person even with REQUIRE_SECOND_APPROVER
// off, and a key-less dlq-admin refuses it.
func TestEraseUserNeedsTheKey(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	logger := slog.New(slog.NewJSONHandler(&syncBuffer{}, nil))
	tokens, err := bearer.Parse("bob:operator:"+operatorToken, api.Roles())
	require.NoError(t, err)
	r := httpserver.NewRouter(logger, httpserver.NewRegistry())
	deps := lifecycle.Deps{Logger: logger}
	gate := approval.New(db.Pool, false, deps)
	erasures := erasure.New(db.Pool, gate, nil, deps)
	gate.Register(erasure.ApprovalKind, erasures.Approvals())
	api.Mount(r, api.Deps{Logger: logger, Approvals: gate, Erasures: erasures, Tokens: tokens})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	fixture.Wallet{Owner: "usr_x"}.Insert(t, db.Pool)
	a := call(t, http.MethodPost, srv.URL+"/v1/erasures", operatorToken, `{"user_id":"usr_x","reason":"ticket 9"}`)
	require.Equal(t, http.StatusServiceUnavailable, a.status, a.raw)
	require.Equal(t, "erasure_not_configured", a.errorCode())
	require.False(t, strings.Contains(a.raw, "usr_x"))
}
