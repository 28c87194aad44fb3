package ui_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// triage is a night of letters to triage: eight identical account_invalid
// failures, a PSP event without a user, and one payout of bob's.
type triage struct {
	invalid              []int64
	event, bobs          int64
	bobsPayout, invalidP string
}

func seedTriage(t *testing.T, db *pgtest.DB) triage {
	t.Helper()
	var s triage
	s.invalidP = addPayout(t, db, "FAILED")
	for i := range 8 {
		p := addPayout(t, db, "FAILED")
		if i == 0 {
			p = s.invalidP
		}
		s.invalid = append(s.invalid, addLetter(t, db, letterSpec{class: "permanent", errText: "payout " + p + ": stripe 400 account_invalid",
			payload: payoutPayload(p), corr: fmt.Sprintf("corr-inv-%d", i)}))
	}
	s.event = addLetter(t, db, letterSpec{topic: kafkax.TopicWebhookPending, class: "permanent", errText: "credit without a user id",
		eventType: "payment_intent.succeeded", user: "-",
		payload: []byte(`{"provider":"stripe","event_id":"evt_3Nx","amount":5000,"currency":"eur","type":"payment_intent.succeeded"}`)})
	_, err := db.Pool.Exec(context.Background(), `UPDATE dead_letters SET partition_key = '' WHERE id = $1`, s.event)
	require.NoError(t, err)
	s.bobsPayout = fixture.Payout{ClientID: "shop", UserID: "alice", Destination: "ba_alice_1", Status: payoutstate.NeedsReview,
		Transitions: []fixture.Transition{
			{To: payoutstate.Initialized},
			{From: payoutstate.Initialized, To: payoutstate.Sending, Attempt: 1},
			{From: payoutstate.Sending, To: payoutstate.NeedsReview, Attempt: 1, Error: "stripe 504: timed out"},
		}}.Insert(t, db.Pool)
	s.bobs = addLetter(t, db, letterSpec{user: "bob", corr: "corr-bob", errText: "retries exhausted: stripe 504: timed out",
		payload: []byte(`{"payout_id":"` + s.bobsPayout + `","user_id":"bob","amount":123456,"currency":"jpy"}`)})
	return s
}

// TestListShowsSubjectsGroupsAndFilters: rows say what failed (payout or
// event, user, amount, event type), when (relative, absolute on hover)
// and why (the whole error, readable); identical failures group with a
// count; the subject filters work and land in the URL.
func TestListShowsSubjectsGroupsAndFilters(t *testing.T) {
	t.Parallel()
	forWidths(t, func(t *testing.T, width int) {
		db := pgtest.New(t)
		s := seedTriage(t, db)
		base := serve(t, db)
		ctx := browserAt(t, width)
		login(t, ctx, base, "/", operatorToken)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(row(s.bobs))))

		bob := text(t, ctx, row(s.bobs))
		require.Contains(t, bob, "payout "+s.bobsPayout)
		require.Contains(t, bob, "bob · 123456 JPY")
		require.Contains(t, bob, "retries exhausted: stripe 504: timed out")
		require.Contains(t, bob, "2h 0m ago")
		title := eval[string](t, ctx, `document.querySelector('`+row(s.bobs)+` td.age').title`)
		require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`, title)
		ev := text(t, ctx, row(s.event))
		require.Contains(t, ev, "stripe event evt_3Nx")
		require.Contains(t, ev, "50.00 EUR")
		require.Contains(t, ev, "payment_intent.succeeded")
		if width == 1400 {
			// The error has the room, not the topic: it wraps instead of
			// being cut at ~20 characters.
			require.Greater(t, eval[float64](t, ctx, `document.querySelector('`+row(s.bobs)+` td.err').getBoundingClientRect().width`), 250.0)
		}
		require.Greater(t, eval[float64](t, ctx, `document.querySelector('`+row(s.bobs)+` td.err').getBoundingClientRect().width`), 150.0)
		require.Equal(t, "retries exhausted: stripe 504: timed out", eval[string](t, ctx, `document.querySelector('`+row(s.bobs)+` td.err').title`))
		if width == 1400 {
			shot(t, ctx, "list")
		}

		// Grouped by class and message: eight account_invalid letters are one row.
		do(t, ctx, chromedp.Click(chromedp.CSS("#view-groups")))
		until(t, ctx, "groups", `document.querySelectorAll('#groups tr').length === 3`)
		first := text(t, ctx, "#groups tr:first-child")
		require.Contains(t, first, "8 ×")
		require.Contains(t, first, "permanent")
		require.Contains(t, first, "stripe <n> account_invalid")
		require.Contains(t, eval[string](t, ctx, `location.search`), "view=groups")
		do(t, ctx, chromedp.Click(chromedp.CSS("#groups tr:first-child button")))
		until(t, ctx, "filtered to the group's class", `document.getElementById('f-class').value === 'permanent' && !document.getElementById('letters-table').hidden`)
		until(t, ctx, "class filter", `document.querySelectorAll('#letters tr').length === 9`)
		until(t, ctx, "the group's sample letter", `/^Dead letter #\d+$/.test(document.getElementById('detail-title').textContent)`)
		do(t, ctx, chromedp.Click(chromedp.CSS("#detail-close")))
		until(t, ctx, "closed", `document.getElementById('detail').hidden`)

		// The subject filters: payout id, user, correlation id, event type.
		for _, c := range []struct {
			input, value string
			want         []int64
		}{
			{"#f-payout", s.bobsPayout, []int64{s.bobs}},
			{"#f-user", "bob", []int64{s.bobs}},
			{"#f-corr", "corr-inv-3", []int64{s.invalid[3]}},
			{"#f-event", "payment_intent.succeeded", []int64{s.event}},
		} {
			do(t, ctx, chromedp.Click(chromedp.CSS("#f-reset")))
			until(t, ctx, "reset", `document.querySelectorAll('#letters tr').length === 10`)
			do(t, ctx, chromedp.SendKeys(chromedp.CSS(c.input), c.value), chromedp.Click(chromedp.CSS("#f-apply")))
			want := fmt.Sprint(c.want[0])
			until(t, ctx, "filtered by "+c.input, `Array.from(document.querySelectorAll('#letters tr')).map(r => r.dataset.id).join(',') === '`+want+`'`)
			q, err := url.ParseQuery(eval[string](t, ctx, `location.search.slice(1)`))
			require.NoError(t, err)
			name := map[string]string{"#f-payout": "payout_id", "#f-user": "user", "#f-corr": "correlation_id", "#f-event": "event_type"}[c.input]
			require.Equal(t, c.value, q.Get(name), "the filter is in the URL")
		}
	})
}

// TestViewerSeesNoWriteControlsAndEachLetterLinksToItsPayout: a viewer's
// page has no write control at all (it learns its role from /v1/me, not
// from a 403); every letter shows its payout's state, history and
// destination, or names its webhook event.
func TestViewerSeesNoWriteControlsAndEachLetterLinksToItsPayout(t *testing.T) {
	t.Parallel()
	forWidths(t, func(t *testing.T, width int) {
		db := pgtest.New(t)
		s := seedTriage(t, db)
		base := serve(t, db)
		ctx := browserAt(t, width)
		login(t, ctx, base, "/", viewerToken)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(row(s.bobs))))
		require.Equal(t, "night · viewer", text(t, ctx, "#me"))
		clickRow(t, ctx, s.bobs)
		waitTitle(t, ctx, s.bobs)
		visibleWrites := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#replay-btn, #discard-btn, #reason, #bulk, #bulk-replay, #bulk-discard, .pick, #pick-page'))
			.filter(e => e.offsetParent !== null || e.getClientRects().length > 0).map(e => e.id || e.className)`)
		require.Empty(t, visibleWrites, "a viewer sees no write control")

		// The payout: state, history, destination.
		until(t, ctx, "payout", `document.getElementById('payout-status').textContent.startsWith('State NEEDS_REVIEW')`)
		require.Equal(t, "Payout "+s.bobsPayout, text(t, ctx, "#payout-title"))
		require.Equal(t, s.bobsPayout, text(t, ctx, "#payout-link"))
		require.Contains(t, text(t, ctx, "#payout-fields"), "stripe ba_alice_1")
		require.Equal(t, 3, eval[int](t, ctx, `document.querySelectorAll('#payout-transitions tr').length`))
		require.Contains(t, text(t, ctx, "#payout-transitions tr:last-child"), "SENDING_TO_GATEWAY → NEEDS_REVIEW")
		if width == 1400 {
			shot(t, ctx, "viewer")
		}

		// A webhook event's letter names its event instead.
		clickRow(t, ctx, s.event)
		waitTitle(t, ctx, s.event)
		require.Equal(t, "Webhook event stripe evt_3Nx", text(t, ctx, "#event-link"))
		require.True(t, eval[bool](t, ctx, `document.getElementById('payout').hidden`))

		// The API refuses a viewer's write anyway.
		require.Zero(t, count(t, db, `SELECT count(*) FROM audit_log`))
	})
}
