package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

type shedAnswer struct {
	id         string
	status     int
	code       string
	retryAfter string
	err        error
}

func sendWebhook(url, id string) shedAnswer {
	body := paymentIntent(id, "user-1", 100)
	req, err := http.NewRequest(http.MethodPost, url+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		return shedAnswer{id: id, err: err}
	}
	for k, v := range stripeHeaders(body, stripeSecret, time.Now()) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return shedAnswer{id: id, err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return shedAnswer{id: id, err: err}
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			return shedAnswer{id: id, err: fmt.Errorf("answer %d not in the contract's error shape: %s", resp.StatusCode, raw)}
		}
	}
	return shedAnswer{id: id, status: resp.StatusCode, code: e.Error.Code, retryAfter: resp.Header.Get("Retry-After")}
}

// TestOverloadIsShedWithRetryAfterAndNothingAcknowledgedIsLost saturates a
// small committer (one committer, groups of 2, so a line of 8 until it
// was measured; the time bound is lifted so that the count alone decides:
// TestStalledCommitIsShedWithRoomInTheLine below proves the time bound) while
// Postgres cannot commit: what does not fit is answered 503 overloaded with
// Retry-After at once, while the rest still waits for its commit; once
// Postgres commits again every webhook answered 200 is stored, none of the
// shed ones is, and new webhooks are accepted as before.
func TestOverloadIsShedWithRetryAfterAndNothingAcknowledgedIsLost(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	url := newServerWith(t, db.Pool, []string{stripeSecret}, options{commit: ingest.CommitterConfig{Workers: 1, MaxGroup: 2, Budget: time.Hour}})
	ctx := context.Background()

	// Postgres stops committing webhooks: their inserts wait for this lock.
	blocker, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(ctx) }()
	_, err = blocker.Exec(ctx, "LOCK TABLE webhook_events IN SHARE MODE")
	require.NoError(t, err)

	const offered = 40
	// At most one group of 2 in its commit and a line of 8 wait for
	// Postgres; every other webhook must be answered without it.
	const held = 2 + 8
	answers := make(chan shedAnswer, offered)
	for i := range offered {
		go func() { answers <- sendWebhook(url, fmt.Sprintf("evt_overload_%d", i)) }()
	}
	var shed []string
	for range offered - held {
		select {
		case a := <-answers:
			require.NoError(t, a.err)
			require.Equal(t, http.StatusServiceUnavailable, a.status, "answered while Postgres commits nothing: %+v", a)
			require.Equal(t, "overloaded", a.code)
			require.Equal(t, "1", a.retryAfter, "a shed webhook says when to retry")
			shed = append(shed, a.id)
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of the %d webhooks beyond the line were answered while Postgres was blocked: they wait instead of being shed", len(shed), offered-held)
		}
	}

	// Postgres commits again: the held webhooks are committed and answered.
	require.NoError(t, blocker.Commit(ctx))
	var accepted []string
	for range held {
		a := <-answers
		require.NoError(t, a.err)
		switch a.status {
		case http.StatusOK:
			accepted = append(accepted, a.id)
		case http.StatusServiceUnavailable: // a group of one left one more place shed
			require.Equal(t, "overloaded", a.code)
			shed = append(shed, a.id)
		default:
			t.Fatalf("unexpected answer %+v", a)
		}
	}
	require.GreaterOrEqual(t, len(accepted), held-1, "the line and the group in commit are committed")
	require.Equal(t, len(accepted), count(t, db, "SELECT count(*) FROM webhook_events WHERE event_id = ANY($1)", accepted),
		"every acknowledged webhook is stored")
	require.Equal(t, len(accepted), count(t, db, "SELECT count(*) FROM transaction_outbox WHERE payload->>'event_id' = ANY($1)", accepted),
		"with its outbox row")
	require.Zero(t, count(t, db, "SELECT count(*) FROM webhook_events WHERE event_id = ANY($1)", shed), "nothing is stored for a shed webhook")

	// The load is gone: webhooks are accepted again, the shed ones too when
	// the PSP retries them.
	for _, id := range append([]string{"evt_after_1", "evt_after_2"}, shed[:3]...) {
		a := sendWebhook(url, id)
		require.NoError(t, a.err)
		require.Equal(t, http.StatusOK, a.status, "%+v", a)
	}
	require.Equal(t, len(accepted)+5, count(t, db, "SELECT count(*) FROM webhook_events"))
}

// Admission is bounded by time. With room for a thousand in the
// line, a webhook that arrives while the committer has been stuck in one
// commit for four budgets (a stall) is answered 503 overloaded with
// Retry-After at once instead of queueing behind it; the stuck one is
// committed and answered 200 once Postgres moves, the shed one is not
// stored, and the next webhook is accepted.
func TestStalledCommitIsShedWithRoomInTheLine(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	const budget = 200 * time.Millisecond
	clk := &clock{t: time.Now()}
	url := newServerWith(t, db.Pool, []string{stripeSecret},
		options{commit: ingest.CommitterConfig{Workers: 1, MaxGroup: 4, MinLine: 1000, Budget: budget}, commitClock: clk.now})
	ctx := context.Background()
	blocker, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(ctx) }()
	_, err = blocker.Exec(ctx, "LOCK TABLE webhook_events IN SHARE MODE")
	require.NoError(t, err)

	stuck := make(chan shedAnswer, 1)
	go func() { stuck <- sendWebhook(url, "evt_stalled") }()
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE NOT l.granted AND a.datname = current_database()`) > 0
	}, 20*time.Second, 10*time.Millisecond, "the first webhook's commit never reached the lock")
	clk.advance(5 * budget) // the commit has now been stuck for more than four budgets: a stall
	shed := sendWebhook(url, "evt_shed")
	require.NoError(t, shed.err)
	require.Equal(t, http.StatusServiceUnavailable, shed.status, "admitted behind a commit stuck beyond the budget: %+v", shed)
	select {
	case a := <-stuck:
		t.Fatalf("the stuck webhook was answered while Postgres was still locked: %+v", a)
	default: // answered at once: the refusal did not wait for the stuck commit
	}
	require.Equal(t, "overloaded", shed.code)
	require.Equal(t, "1", shed.retryAfter, "a shed webhook says when to retry")

	require.NoError(t, blocker.Commit(ctx))
	a := <-stuck
	require.NoError(t, a.err)
	require.Equal(t, http.StatusOK, a.status, "%+v", a)
	require.Equal(t, 1, count(t, db, "SELECT count(*) FROM webhook_events WHERE event_id = 'evt_stalled'"))
	require.Zero(t, count(t, db, "SELECT count(*) FROM webhook_events WHERE event_id = $1", shed.id), "nothing is stored for a shed webhook")
	after := sendWebhook(url, "evt_after_stall")
	require.NoError(t, after.err)
	require.Equal(t, http.StatusOK, after.status, "%+v", after)
}
