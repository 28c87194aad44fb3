package ui_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// outboundFixture is an endpoint the relay has been failing to reach: one
// delivery succeeded, one failed after its attempts, one message never
// delivered (it was disabled then).
type outboundFixture struct {
	endpoint, secret          string
	succeeded, failed, missed int64
	since                     time.Time
}

func seedOutbound(t *testing.T, db *pgtest.DB) outboundFixture {
	t.Helper()
	ctx := context.Background()
	secret, err := outbound.NewSecret()
	require.NoError(t, err)
	f := outboundFixture{secret: secret, since: time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)}
	require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO outbound_endpoints (url, description, event_types, secret, created_by)
		VALUES ('https://hooks.shop.example/aegis', 'shop ledger', '{payout.*}', $1, 'ops') RETURNING id::text`, secret).Scan(&f.endpoint))
	_, err = db.Pool.Exec(ctx, `INSERT INTO outbound_endpoint_health (endpoint_id, failing_since, last_success_at, last_failure_at)
		VALUES ($1, $2, $3, now())`, f.endpoint, f.since.Add(30*time.Minute), f.since.Add(10*time.Minute))
	require.NoError(t, err)
	msg := func(n int64, typ string) int64 {
		var id int64
		require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO outbound_messages (event_id, event_type, user_id, sequence, occurred_at, body, created_at)
			VALUES ($1, $2, 'user-9', $3, $4, convert_to('{}', 'UTF8'), $4) RETURNING id`,
			fmt.Sprintf("ev-%d", n), typ, n, f.since.Add(time.Duration(n)*time.Minute)).Scan(&id))
		return id
	}
	delivery := func(m int64, state string, status int, answer string) int64 {
		var id int64
		require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO outbound_deliveries (message_id, endpoint_id, state, attempts, last_attempt_at,
			last_status, last_error, finished_at) VALUES ($1, $2, $3, 1, now(), $4, nullif($5, ''), now()) RETURNING id`,
			m, f.endpoint, state, status, map[bool]string{true: "", false: answer}[state == "succeeded"]).Scan(&id))
		outcome := map[string]string{"succeeded": "delivered", "failed": "failed"}[state]
		_, err := db.Pool.Exec(ctx, `INSERT INTO outbound_attempts (delivery_id, message_id, endpoint_id, attempt, attempted_at, outcome,
			status_code, latency_ms, response_body) VALUES ($1, $2, $3, 1, now(), $4, $5, 80, $6)`, id, m, f.endpoint, outcome, status, answer)
		require.NoError(t, err)
		return id
	}
	f.succeeded = delivery(msg(1, "payout.succeeded"), "succeeded", 200, "ok")
	f.failed = delivery(msg(2, "payout.failed"), "failed", 503, "<b>upstream</b> unavailable")
	f.missed = msg(3, "payout.canceled")
	return f
}

func openEndpoints(t *testing.T, ctx context.Context, id, title string) {
	t.Helper()
	do(t, ctx, chromedp.Click(chromedp.CSS("#view-endpoints")))
	until(t, ctx, "endpoints listed", `document.querySelectorAll('#ep-rows tr[data-id]').length > 0`)
	sel := fmt.Sprintf(`#ep-rows tr[data-id=%q]`, id)
	clickAt(t, ctx, sel, sel, 40)
	until(t, ctx, "the endpoint's deliveries", `document.getElementById('ep-title').textContent === '`+title+`'
		&& document.querySelectorAll('#ep-delivery-rows tr').length === 2 && document.querySelectorAll('#ep-attempt-rows tr').length === 2`)
}

// An operator reads an endpoint's health, deliveries and attempts, re-sends
// the failed delivery, recovers what it missed, rotates the secret (shown
// once, gone when another endpoint is opened), disables and enables it;
// every action lands in the database.
func TestOperatorManagesAnEndpointInTheBrowser(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	f := seedOutbound(t, db)
	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
		return n
	}
	url := serve(t, db)
	ctx := browser(t)
	login(t, ctx, url, "/", operatorToken)
	openEndpoints(t, ctx, f.endpoint, "https://hooks.shop.example/aegis")
	row := text(t, ctx, fmt.Sprintf(`#ep-rows tr[data-id=%q]`, f.endpoint))
	require.Contains(t, row, "failing")
	require.Contains(t, row, "payout.*")
	require.True(t, eval[bool](t, ctx, `document.getElementById('filters').offsetParent === null`), "the letters' filters are out of the way")
	require.Contains(t, text(t, ctx, "#ep-attempt-rows"), "<b>upstream</b> unavailable", "a receiver's answer is text, not markup")
	require.Equal(t, 0, eval[int](t, ctx, `document.querySelectorAll('#ep-attempt-rows b').length`))
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('#ep-delivery-rows button').length`), "only the failed one is re-sendable")

	// Re-send the failed delivery.
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#ep-delivery-rows tr[data-id="%d"] button`, f.failed))))
	until(t, ctx, "re-sent", `document.getElementById('ep-result').textContent.includes('is due now')`)
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_deliveries WHERE id = $1 AND state = 'pending' AND attempts = 0`, f.failed))

	// Recover since: the missed message (the failed one is pending now).
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#ep-since"), datetimeLocal(f.since)),
		chromedp.Click(chromedp.CSS("#ep-recover")))
	until(t, ctx, "recovered", `document.getElementById('ep-result').textContent.includes('1 deliveries scheduled')`)
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_deliveries WHERE message_id = $1 AND endpoint_id = $2 AND state = 'pending'`, f.missed, f.endpoint))

	// Rotate: confirmed, the new secret shown once, the old one kept.
	do(t, ctx, chromedp.Click(chromedp.CSS("#ep-rotate")))
	until(t, ctx, "confirmation", `!document.getElementById('ep-confirm').hidden`)
	require.Contains(t, text(t, ctx, "#ep-confirm-text"), "https://hooks.shop.example/aegis")
	eval[bool](t, ctx, `(() => { const b = document.getElementById('ep-confirm-go'); b.click(); b.click(); return true; })()`)
	until(t, ctx, "secret shown", `!document.getElementById('ep-secret').hidden`)
	shown := text(t, ctx, "#ep-secret-value")
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND secret = $2 AND previous_secret = $3`, f.endpoint, shown, f.secret))
	require.Equal(t, 1, count(`SELECT count(*) FROM audit_log WHERE action = 'outbound_endpoint_rotate_secret'`), "a double click rotates once")

	// Disable needs a reason; enable.
	do(t, ctx, chromedp.Click(chromedp.CSS("#ep-disable")))
	until(t, ctx, "reason asked", `document.getElementById('ep-result').textContent === 'Disabling needs a reason.'`)
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#ep-reason"), "receiver migrating"), chromedp.Click(chromedp.CSS("#ep-disable")))
	until(t, ctx, "disabled", `document.getElementById('ep-badge').textContent === 'disabled' && !document.getElementById('ep-enable').hidden`)
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND NOT enabled AND disabled_by = 'ops'
		AND disabled_reason = 'receiver migrating'`, f.endpoint))
	do(t, ctx, chromedp.Click(chromedp.CSS("#ep-enable")))
	until(t, ctx, "enabled", `document.getElementById('ep-badge').textContent !== 'disabled' && !document.getElementById('ep-disable').hidden`)
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND enabled`, f.endpoint))

	// Closing the endpoint takes the secret off the screen.
	do(t, ctx, chromedp.Click(chromedp.CSS("#ep-close")))
	require.True(t, eval[bool](t, ctx, `document.getElementById('ep-secret').hidden && document.getElementById('ep-secret-value').textContent === ''`))
}

// A viewer sees the endpoints, their deliveries and attempts, and no write
// control.
func TestViewerSeesEndpointsWithoutActions(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	f := seedOutbound(t, db)
	url := serve(t, db)
	ctx := browser(t)
	login(t, ctx, url, "/?view=endpoints", viewerToken)
	until(t, ctx, "endpoints listed", `document.querySelectorAll('#ep-rows tr[data-id]').length === 1`)
	require.Equal(t, "true", eval[string](t, ctx, `document.getElementById('view-endpoints').getAttribute('aria-pressed')`))
	openEndpoints(t, ctx, f.endpoint, "https://hooks.shop.example/…")
	require.True(t, eval[bool](t, ctx, `document.getElementById('ep-actions').hidden`))
	require.Equal(t, 0, eval[int](t, ctx, `document.querySelectorAll('#ep-delivery-rows button').length`))
	body := eval[string](t, ctx, `document.body.innerText`)
	require.NotContains(t, body, "whsec_")
	require.NotContains(t, body, "/aegis", "a viewer reads the URL redacted")
}

// datetimeLocal is t as a datetime-local input serialises it: Chrome drops
// zero seconds ("15:04", not "15:04:00"), and chromedp's SetValue fails when
// the value read back differs from the one set.
func datetimeLocal(t time.Time) string {
	if t.Second() == 0 {
		return t.Format("2006-01-02T15:04")
	}
	return t.Format("2006-01-02T15:04:05")
}
