package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/jobs"
)

// payout stores a payout in status for user-1 and returns its id.
func (b bundle) payout(t *testing.T, status string) string {
	t.Helper()
	return fixture.Payout{ClientID: "shop", Status: payoutstate.Status(status)}.Insert(t, b.db.Pool)
}

func commandPayload(payoutID string) []byte {
	return fmt.Appendf(nil, `{"payout_id":%q,"user_id":"user-1","amount":1500,"currency":"usd","provider":"stripe","attempt":0}`, payoutID)
}

func TestReplayAnswerAndDetailSayWhatTheReplayDid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	finalized := b.payout(t, "FINALIZED")
	noop := insert(t, b.db, kafkax.TopicTransactions, "permanent", 1, t0, commandPayload(finalized), nil)
	again := insert(t, b.db, kafkax.TopicTransactions, "transient", 2, t0, commandPayload(b.payout(t, "RETRYING")), nil)
	poison := insert(t, b.db, kafkax.TopicTransactions, "poison", 3, t0, []byte("\x00\x01"), nil)
	detail := func(id int64) answer {
		a := get(t, fmt.Sprintf("%s/v1/dead-letters/%d", b.url, id), operatorToken)
		require.Equal(t, http.StatusOK, a.status, a.raw)
		return a
	}

	// Before: open, replayable (or not, and why), no replay yet.
	d := detail(noop)
	require.Nil(t, d.body["replay"])
	require.Equal(t, true, d.body["replayable"])
	require.Nil(t, d.body["not_replayable_reason"])
	require.Equal(t, map[string]any{"outcome": "noop", "subject_state": "FINALIZED"}, d.body["replay_would"],
		"the detail warns that a replay would do nothing")
	require.Equal(t, map[string]any{"outcome": "republished", "subject_state": nil}, detail(again).body["replay_would"])
	d = detail(poison)
	require.Equal(t, false, d.body["replayable"])
	require.Contains(t, d.body["not_replayable_reason"], "not JSON")
	require.Nil(t, d.body["replay_would"])

	// The payout is FINALIZED: nothing is published, and the answer says so.
	a := call(t, http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", b.url, noop), operatorToken, "")
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "noop", a.body["outcome"])
	require.Nil(t, a.body["outbox_id"])
	require.Equal(t, "FINALIZED", a.body["subject_state"])
	require.Contains(t, a.body["message"], "nothing published: payout "+finalized+" is already FINALIZED")
	require.Equal(t, "replayed", a.body["dead_letter"].(map[string]any)["status"])
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`))
	require.Nil(t, detail(noop).body["replay_would"], "resolved: nothing to predict")
	rp := detail(noop).body["replay"].(map[string]any)
	require.Equal(t, "noop", rp["outcome"])
	require.Equal(t, "FINALIZED", rp["subject_state"])
	require.Nil(t, rp["outbox_id"])

	// A retrying payout: republished.
	a = call(t, http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", b.url, again), operatorToken, "")
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "republished", a.body["outcome"])
	require.NotNil(t, a.body["outbox_id"])
	require.Nil(t, a.body["subject_state"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox WHERE id = $1`, int64(a.body["outbox_id"].(float64))))
	d = detail(again)
	rp = d.body["replay"].(map[string]any)
	require.Equal(t, "republished", rp["outcome"])
	require.Equal(t, a.body["outbox_id"], rp["outbox_id"])
	require.Equal(t, []any{}, d.body["failed_again_as"])

	// It fails again: the new letter carries replay_of, and the detail of
	// the replayed one names it.
	failed := insert(t, b.db, kafkax.TopicTransactions, "transient", 4, t0, commandPayload("x"),
		map[string]string{"replay_of": fmt.Sprint(again)})
	require.Equal(t, []any{float64(failed)}, detail(again).body["failed_again_as"])

	// The list shows outcomes too.
	l := get(t, b.url+"/v1/dead-letters?status=replayed", viewerToken)
	require.Equal(t, http.StatusOK, l.status, l.raw)
	outcomes := map[int64]string{}
	for _, it := range l.body["items"].([]any) {
		m := it.(map[string]any)
		outcomes[int64(m["id"].(float64))] = m["replay"].(map[string]any)["outcome"].(string)
	}
	require.Equal(t, map[int64]string{noop: "noop", again: "republished"}, outcomes)
}

func TestMeSaysWhoTheTokenIs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := get(t, b.url+"/v1/me", viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, map[string]any{"name": "alice", "role": "viewer"}, a.body)
	a = get(t, b.url+"/v1/me", operatorToken)
	require.Equal(t, map[string]any{"name": "bob", "role": "operator"}, a.body)
	require.Equal(t, http.StatusUnauthorized, get(t, b.url+"/v1/me", "").status)
	require.Equal(t, http.StatusUnauthorized, get(t, b.url+"/v1/me", "nope-0123456789").status)
}

// subjects stores letters about payouts and PSP events of two users.
type subjects struct {
	payoutA1, payoutA2, payoutB, credit, eventPaid, poison int64
	payoutA                                                string
}

func (b bundle) subjects(t *testing.T) subjects {
	t.Helper()
	var s subjects
	s.payoutA = "0193a1b2-0000-7000-8000-0000000000a1"
	ins := func(off int64, topic, class, key, eventType, corr string, payload []byte, errText string) int64 {
		p := int32(0)
		id, ok, err := dlq.Insert(context.Background(), b.db.Pool, dlq.Letter{
			Source: dlq.SourceConsumer, OriginalTopic: topic, OriginalPartition: &p, OriginalOffset: &off,
			ConsumerGroup: "payout-worker", PartitionKey: key, EventType: eventType, Payload: payload,
			Error: errText, ErrorClass: class, FailedAt: t0.Add(time.Duration(off) * time.Minute), CorrelationID: corr,
		})
		require.NoError(t, err)
		require.True(t, ok)
		return id
	}
	cmd := func(payoutID, user string) []byte {
		return fmt.Appendf(nil, `{"payout_id":%q,"user_id":%q,"amount":1500,"currency":"usd","provider":"stripe"}`, payoutID, user)
	}
	s.payoutA1 = ins(1, kafkax.TopicTransactions, "permanent", "alice", "payout.requested", "corr-a1", cmd(s.payoutA, "alice"),
		"payout 0193a1b2-0000-7000-8000-0000000000a1: stripe 400 account_invalid")
	s.payoutA2 = ins(2, kafkax.TopicTransactions, "permanent", "alice", "payout.requested", "corr-a2", cmd(s.payoutA, "alice"),
		"payout 0193a1b2-0000-7000-8000-0000000000a1: stripe 400 account_invalid")
	s.payoutB = ins(3, kafkax.TopicTransactions, "permanent", "carol", "payout.requested", "corr-b", cmd("0193a1b2-0000-7000-8000-0000000000b1", "carol"),
		"payout 0193a1b2-0000-7000-8000-0000000000b1: stripe 400 account_invalid")
	s.credit = ins(4, kafkax.TopicWebhookPending, "permanent", "carol", "payment_intent.succeeded", "corr-c",
		[]byte(`{"provider":"stripe","event_id":"evt_1","type":"payment_intent.succeeded","action":"credit","user_id":"carol","amount":5000,"currency":"eur","reference":"pi_1"}`),
		"credit amount 5000 exceeds limit 1000")
	s.eventPaid = ins(5, kafkax.TopicWebhookPending, "transient", "", "payout.paid", "corr-a1",
		[]byte(`{"provider":"stripe","event_id":"evt_2","type":"payout.paid","action":"payout_paid","payout_id":"0193a1b2-0000-7000-8000-0000000000a1","amount":1500,"currency":"usd"}`),
		"deadlock detected")
	s.poison = ins(6, kafkax.TopicSettlements, "poison", "alice", "payout.succeeded", "corr-p", []byte("\x00garbage"), "not decodable")
	return s
}

func TestListFiltersBySubjectAndShowsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.subjects(t)

	cases := []struct {
		query string
		want  []int64
	}{
		{"payout_id=" + s.payoutA, []int64{s.eventPaid, s.payoutA2, s.payoutA1}},
		{"payout_id=" + s.payoutA + "&topic=aegis.transactions", []int64{s.payoutA2, s.payoutA1}},
		{"user=carol", []int64{s.credit, s.payoutB}},
		{"user=alice&error_class=permanent", []int64{s.payoutA2, s.payoutA1}},
		{"correlation_id=corr-a1", []int64{s.eventPaid, s.payoutA1}},
		{"event_type=payout.paid", []int64{s.eventPaid}},
		{"event_type=payment_intent.succeeded&user=alice", []int64{}},
		{"payout_id=nope", []int64{}},
	}
	for _, tc := range cases {
		a := get(t, b.url+"/v1/dead-letters?"+tc.query, viewerToken)
		require.Equal(t, http.StatusOK, a.status, a.raw)
		require.Equal(t, tc.want, itemIDs(t, a), tc.query)
	}

	// Every item carries its subject; keys are always there.
	a := get(t, b.url+"/v1/dead-letters", viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	subject := map[int64]map[string]any{}
	for _, it := range a.body["items"].([]any) {
		m := it.(map[string]any)
		subject[int64(m["id"].(float64))] = m["subject"].(map[string]any)
	}
	require.Equal(t, map[string]any{"payout_id": s.payoutA, "provider": "stripe", "event_id": nil, "user_id": "alice",
		"amount": float64(1500), "currency": "usd", "event_type": "payout.requested"}, subject[s.payoutA1])
	require.Equal(t, map[string]any{"payout_id": nil, "provider": "stripe", "event_id": "evt_1", "user_id": "carol",
		"amount": float64(5000), "currency": "eur", "event_type": "payment_intent.succeeded"}, subject[s.credit])
	require.Equal(t, map[string]any{"payout_id": s.payoutA, "provider": "stripe", "event_id": "evt_2", "user_id": nil,
		"amount": float64(1500), "currency": "usd", "event_type": "payout.paid"}, subject[s.eventPaid])
	require.Equal(t, map[string]any{"payout_id": nil, "provider": nil, "event_id": nil, "user_id": "alice",
		"amount": nil, "currency": nil, "event_type": "payout.succeeded"}, subject[s.poison])

	// Filters are validated.
	a = get(t, b.url+"/v1/dead-letters?payout_id="+strings.Repeat("x", 501), viewerToken)
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Contains(t, a.errorMessage(), "payout_id")
}

func TestListFiltersUseTheirIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.subjects(t)
	ctx := context.Background()
	conn, err := b.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET enable_seqscan = off")
	require.NoError(t, err)
	for index, cond := range map[string]string{
		"dead_letters_payout_idx":        `subject ? 'payout_id' AND subject->>'payout_id' = 'x'`,
		"dead_letters_partition_key_idx": `partition_key = 'x'`,
		"dead_letters_correlation_idx":   `correlation_id = 'x'`,
		"dead_letters_event_type_idx":    `event_type = 'x'`,
	} {
		var plan string
		rows, err := conn.Query(ctx, "EXPLAIN SELECT id FROM dead_letters WHERE id < 100 AND "+cond+" ORDER BY id DESC LIMIT 50")
		require.NoError(t, err)
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan += line + "\n"
		}
		require.NoError(t, rows.Err())
		require.Contains(t, plan, index, plan)
	}
}

func TestGroupsCountOpenLettersByClassAndMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.subjects(t)

	a := get(t, b.url+"/v1/dead-letters/groups", viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	items := a.body["items"].([]any)
	require.Len(t, items, 4)
	first := items[0].(map[string]any)
	require.Equal(t, "permanent", first["error_class"])
	require.Equal(t, "payout <id>: stripe <n> account_invalid", first["message"])
	require.Equal(t, float64(3), first["count"], "three payouts, one message")
	require.Equal(t, float64(s.payoutB), first["sample_id"])
	require.Contains(t, first["sample_error"], "0000000000b1")
	require.Equal(t, []any{"aegis.transactions"}, first["topics"])
	require.Equal(t, t0.Add(time.Minute).Format(time.RFC3339), first["oldest_failed_at"])
	require.Equal(t, t0.Add(3*time.Minute).Format(time.RFC3339), first["newest_failed_at"])
	messages := map[string]float64{}
	for _, it := range items {
		m := it.(map[string]any)
		messages[m["error_class"].(string)+": "+m["message"].(string)] = m["count"].(float64)
	}
	require.Equal(t, map[string]float64{
		"permanent: payout <id>: stripe <n> account_invalid": 3,
		"permanent: credit amount <n> exceeds limit <n>":     1,
		"transient: deadlock detected":                       1,
		"poison: not decodable":                              1,
	}, messages)

	// Filterable like the list; resolved letters are left out unless asked.
	a = get(t, b.url+"/v1/dead-letters/groups?user=alice&topic=aegis.transactions", viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Len(t, a.body["items"], 1)
	require.Equal(t, float64(2), a.body["items"].([]any)[0].(map[string]any)["count"])
	_, err := b.db.Pool.Exec(context.Background(), `UPDATE dead_letters SET status = 'discarded', resolved_at = now(),
		resolved_by = 'bob', resolution_reason = 'x' WHERE id = $1`, s.payoutA1)
	require.NoError(t, err)
	a = get(t, b.url+"/v1/dead-letters/groups?user=alice&topic=aegis.transactions", viewerToken)
	require.Equal(t, float64(1), a.body["items"].([]any)[0].(map[string]any)["count"])
	a = get(t, b.url+"/v1/dead-letters/groups?user=alice&topic=aegis.transactions&status=", viewerToken)
	require.Equal(t, float64(2), a.body["items"].([]any)[0].(map[string]any)["count"], "status= is every status")
	a = get(t, b.url+"/v1/dead-letters/groups?status=bogus", viewerToken)
	require.Equal(t, http.StatusBadRequest, a.status)
}

func TestBulkDiscard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.subjects(t)
	post := func(token, body string) answer {
		return call(t, http.MethodPost, b.url+"/v1/dead-letters/discard", token, body)
	}
	open := func() int { return b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open'`) }

	// Viewers may not; a real run needs a reason; the status filter is open.
	a := post(viewerToken, `{"user":"alice","max":10,"reason":"x"}`)
	require.Equal(t, http.StatusForbidden, a.status)
	for _, body := range []string{
		`{"user":"alice","max":10}`, `{"user":"alice","max":10,"reason":"  "}`, `{"user":"alice","reason":"x"}`,
		`{"user":"alice","max":10,"reason":"x","status":"replayed"}`, `{"ids":[0],"reason":"x"}`,
		`{"user":"alice","max":10,"reason":"x","dry_rn":true}`,
	} {
		a = post(operatorToken, body)
		require.Equal(t, http.StatusBadRequest, a.status, body)
	}
	require.Equal(t, 6, open())
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log`))

	// A dry run counts and changes nothing; no reason needed.
	a = post(operatorToken, `{"payout_id":"`+s.payoutA+`","dry_run":true,"max":2}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, map[string]any{"dry_run": true, "matched": float64(3), "discarded": float64(2),
		"ids": []any{float64(s.payoutA1), float64(s.payoutA2)}}, a.body)
	require.Equal(t, 6, open())

	// For real: at most max, oldest first, each audited.
	a = post(operatorToken, `{"payout_id":"`+s.payoutA+`","max":2,"reason":"payout cancelled with the customer"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, map[string]any{"dry_run": false, "matched": float64(3), "discarded": float64(2),
		"ids": []any{float64(s.payoutA1), float64(s.payoutA2)}}, a.body)
	for _, id := range []int64{s.payoutA1, s.payoutA2} {
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'discarded'
			AND resolved_by = 'bob' AND resolution_reason = 'payout cancelled with the customer'`, id))
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'discard' AND target_type = 'dead_letter'
			AND target_id = $1::bigint::text AND actor = 'bob' AND reason = 'payout cancelled with the customer'
			AND detail->>'bulk' = 'true'`, id))
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'bulk_discard' AND actor = 'bob'
		AND (detail->>'discarded')::int = 2 AND detail->'filter'->>'payout_id' = $1`, s.payoutA))
	require.Equal(t, 4, open())

	// Explicit ids: only those still open are discarded.
	a = post(operatorToken, fmt.Sprintf(`{"ids":[%d,%d,%d],"reason":"known PSP incident"}`, s.payoutA1, s.credit, s.poison))
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, map[string]any{"dry_run": false, "matched": float64(2), "discarded": float64(2),
		"ids": []any{float64(s.credit), float64(s.poison)}}, a.body)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND resolution_reason = 'payout cancelled with the customer'`, s.payoutA1),
		"an already discarded letter keeps its resolution")
	require.Equal(t, 2, open())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'open'`, s.payoutB))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'open'`, s.eventPaid))

	// Nothing left to match: an empty answer, not an error.
	a = post(operatorToken, `{"user":"nobody","max":5,"reason":"x"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, float64(0), a.body["discarded"])
	require.Equal(t, []any{}, a.body["ids"])
}

func TestBulkReplayBySubjectReportsEachLetter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.subjects(t)
	finalized := b.payout(t, "FINALIZED")
	done := insert(t, b.db, kafkax.TopicTransactions, "permanent", 50, t0, commandPayload(finalized), nil)

	// A runner on the same database works the jobs the API queues.
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	st := store.New(b.db.Pool)
	runner, err := jobs.New(b.db.Pool, replay.New(b.db.Pool, st, lifecycle.Deps{Logger: logger, Clock: time.Now}), nil,
		jobs.Config{ReplayRate: 1000, FetchPoll: 20 * time.Millisecond}, lifecycle.Deps{Logger: logger})
	require.NoError(t, err)
	require.NoError(t, runner.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, runner.Stop(context.Background())) })

	// The subject filters select the job's letters: alice's payout, and the
	// FINALIZED one (a no-op).
	a := call(t, http.MethodPost, b.url+"/v1/dead-letters/replay", operatorToken,
		`{"payout_id":"`+s.payoutA+`","topic":"aegis.transactions","dry_run":true,"max":10}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.JSONEq(t, fmt.Sprintf(`{"dry_run":true,"matched":2,"would_replay":2,"ids":[%d,%d]}`, s.payoutA1, s.payoutA2), a.raw)
	var jobs []int64
	for _, body := range []string{
		`{"payout_id":"` + s.payoutA + `","topic":"aegis.transactions","max":10,"reason":"account fixed"}`,
		`{"payout_id":"` + finalized + `","max":10}`,
	} {
		a = call(t, http.MethodPost, b.url+"/v1/dead-letters/replay", operatorToken, body)
		require.Equal(t, http.StatusAccepted, a.status, a.raw)
		jobs = append(jobs, int64(a.body["id"].(float64)))
	}
	wait := func(id int64) map[string]any {
		var job answer
		require.Eventually(t, func() bool {
			job = get(t, fmt.Sprintf("%s/v1/replay-jobs/%d", b.url, id), viewerToken)
			return job.body["status"] == "done"
		}, 30*time.Second, 20*time.Millisecond)
		return job.body
	}
	j := wait(jobs[0])
	require.Equal(t, float64(2), j["replayed"])
	require.Equal(t, float64(0), j["noop"])
	require.Equal(t, s.payoutA, j["filter"].(map[string]any)["payout_id"])
	j = wait(jobs[1])
	require.Equal(t, float64(0), j["replayed"])
	require.Equal(t, float64(1), j["noop"])

	l := get(t, fmt.Sprintf("%s/v1/replay-jobs/%d/letters", b.url, jobs[0]), viewerToken)
	require.Equal(t, http.StatusOK, l.status, l.raw)
	items := l.body["items"].([]any)
	require.Len(t, items, 2)
	first := items[0].(map[string]any)
	require.Equal(t, float64(s.payoutA1), first["dead_letter_id"])
	require.Equal(t, "republished", first["outcome"])
	require.NotNil(t, first["outbox_id"])
	l = get(t, fmt.Sprintf("%s/v1/replay-jobs/%d/letters?after=%d&limit=5", b.url, jobs[0], s.payoutA1), viewerToken)
	require.Len(t, l.body["items"], 1)
	l = get(t, fmt.Sprintf("%s/v1/replay-jobs/%d/letters", b.url, jobs[1]), viewerToken)
	require.Equal(t, []any{map[string]any{"dead_letter_id": float64(done), "outcome": "noop", "outbox_id": nil,
		"subject_state": "FINALIZED", "error": nil, "at": l.body["items"].([]any)[0].(map[string]any)["at"]}}, l.body["items"])
	require.Equal(t, http.StatusNotFound, get(t, fmt.Sprintf("%s/v1/replay-jobs/%d/letters", b.url, jobs[1]+10), viewerToken).status)
	require.Equal(t, http.StatusBadRequest, get(t, fmt.Sprintf("%s/v1/replay-jobs/%d/letters?after=x", b.url, jobs[1]), viewerToken).status)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM transaction_outbox`), "only alice's two letters were published")
}

// TestBulkReplayOfPickedLetters: rows picked on the page are a bulk replay
// of exactly those letters (among the filter's matches), previewed first.
func TestBulkReplayOfPickedLetters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.subjects(t)
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	st := store.New(b.db.Pool)
	runner, err := jobs.New(b.db.Pool, replay.New(b.db.Pool, st, lifecycle.Deps{Logger: logger, Clock: time.Now}), nil,
		jobs.Config{ReplayRate: 1000, FetchPoll: 20 * time.Millisecond}, lifecycle.Deps{Logger: logger})
	require.NoError(t, err)
	require.NoError(t, runner.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, runner.Stop(context.Background())) })

	picked := fmt.Sprintf(`[%d,%d]`, s.payoutA2, s.payoutB)
	a := call(t, http.MethodPost, b.url+"/v1/dead-letters/replay", operatorToken, `{"ids":`+picked+`,"dry_run":true,"max":2}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.JSONEq(t, `{"dry_run":true,"matched":2,"would_replay":2,"ids":`+picked+`}`, a.raw)
	// Filters and ids together: the picked letters that match.
	a = call(t, http.MethodPost, b.url+"/v1/dead-letters/replay", operatorToken,
		`{"ids":`+picked+`,"payout_id":"`+s.payoutA+`","dry_run":true,"max":2}`)
	require.JSONEq(t, fmt.Sprintf(`{"dry_run":true,"matched":1,"would_replay":1,"ids":[%d]}`, s.payoutA2), a.raw)
	a = call(t, http.MethodPost, b.url+"/v1/dead-letters/replay", operatorToken, `{"ids":[0],"max":1}`)
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)

	a = call(t, http.MethodPost, b.url+"/v1/dead-letters/replay", operatorToken, `{"ids":`+picked+`,"max":2,"reason":"accounts fixed"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	job := int64(a.body["id"].(float64))
	require.Eventually(t, func() bool {
		return get(t, fmt.Sprintf("%s/v1/replay-jobs/%d", b.url, job), viewerToken).body["status"] == "done"
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'replayed'`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'replayed' AND id = ANY($1)`, []int64{s.payoutA2, s.payoutB}))
	j := get(t, fmt.Sprintf("%s/v1/replay-jobs/%d", b.url, job), viewerToken)
	require.Equal(t, []any{float64(s.payoutA2), float64(s.payoutB)}, j.body["filter"].(map[string]any)["ids"])
}
