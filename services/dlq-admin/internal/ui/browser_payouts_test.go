package ui_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

const secondOperatorToken = "second-operator-token-0123456789"

// reviewPayout inserts a payout in status, created at, with the error that
// put it there.
func reviewPayout(t *testing.T, db *pgtest.DB, status string, created time.Time, amount int64) string {
	t.Helper()
	return fixture.Payout{ClientID: "shop", UserID: "user-9", Amount: amount, Destination: "ba_9", Status: payoutstate.Status(status),
		LastError: "psp_missing: the PSP accepted the payout but a lookup finds no object for it", PSPReference: "po_known",
		CreatedAt: created}.Insert(t, db.Pool)
}

func poRow(id string) string { return fmt.Sprintf(`#po-rows tr[data-id=%q]`, id) }

func openPayouts(t *testing.T, ctx context.Context) {
	t.Helper()
	do(t, ctx, chromedp.Click(chromedp.CSS("#view-payouts")))
	until(t, ctx, "payouts listed", `document.querySelectorAll('#po-rows tr[data-id]').length > 0`)
}

func waitPayout(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	until(t, ctx, "payout "+id, fmt.Sprintf(`document.getElementById('po-title').textContent === 'Payout %s' &&
		!document.getElementById('po-body').hidden`, id))
}

// An operator resolves the payout shown, at both widths: NEEDS_REVIEW
// first, the resolve button only once outcome, reason and evidence are
// there, a confirmation that says what happens, one POST for a double
// click, the worker's verdict shown when it comes; a payout still loading
// (or that failed to load) cannot be acted on.
func TestOperatorResolvesAPayoutInTheBrowser(t *testing.T) {
	t.Parallel()
	for _, width := range widths {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			now := time.Now()
			done := reviewPayout(t, db, "SUCCEEDED", now.Add(-3*time.Hour), 700)
			first := reviewPayout(t, db, "NEEDS_REVIEW", now.Add(-2*time.Hour), 1500)
			second := reviewPayout(t, db, "NEEDS_REVIEW", now.Add(-time.Hour), 2500)
			f := newFaults()
			url := serveWith(t, db, serverConfig{faults: f})
			ctx := browserAt(t, width)
			login(t, ctx, url, "/", operatorToken)
			openPayouts(t, ctx)
			require.Equal(t, []string{first, second},
				eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#po-rows tr')).map(r => r.dataset.id)`))
			require.Contains(t, text(t, ctx, poRow(first)), "psp_missing")
			require.Contains(t, text(t, ctx, poRow(first)), "15.00 USD")
			require.True(t, eval[bool](t, ctx, `document.getElementById('filters').offsetParent === null`), "the letters' filters are out of the way")

			// Any status: NEEDS_REVIEW first, then the oldest.
			eval[bool](t, ctx, `(() => { const s = document.getElementById('po-status'); s.value = ''; return s.dispatchEvent(new Event('change')); })()`)
			until(t, ctx, "every status", `document.querySelectorAll('#po-rows tr[data-id]').length === 3`)
			require.Equal(t, []string{first, second, done},
				eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#po-rows tr')).map(r => r.dataset.id)`))

			// A payout that is slow to load is not acted on meanwhile.
			hold := make(chan struct{})
			f.set("/v1/payouts/"+second, fault{hold: hold})
			clickAt(t, ctx, poRow(second), poRow(second), 40)
			until(t, ctx, "loading", `!document.getElementById('po-loading').hidden`)
			require.True(t, eval[bool](t, ctx, `document.getElementById('po-body').hidden && document.getElementById('po-resolve-btn').disabled`))
			close(hold)
			f.clear("/v1/payouts/" + second)
			waitPayout(t, ctx, second)

			// The first one, resolved as failed.
			clickAt(t, ctx, poRow(first), poRow(first), 40)
			waitPayout(t, ctx, first)
			require.True(t, eval[bool](t, ctx, `document.getElementById('po-resolve-btn').disabled`), "nothing chosen yet")
			do(t, ctx, chromedp.Click(chromedp.CSS("#po-failed-outcome")),
				chromedp.SendKeys(chromedp.CSS("#po-evidence"), "po_1Abc"))
			require.True(t, eval[bool](t, ctx, `document.getElementById('po-resolve-btn').disabled`), "a reason is required")
			do(t, ctx, chromedp.SendKeys(chromedp.CSS("#po-reason"), "Stripe dashboard: failed, account closed"))
			until(t, ctx, "resolve enabled", `!document.getElementById('po-resolve-btn').disabled`)
			do(t, ctx, chromedp.Click(chromedp.CSS("#po-resolve-btn")))
			until(t, ctx, "confirmation", `!document.getElementById('po-confirm').hidden`)
			confirm := text(t, ctx, "#po-confirm-text")
			require.Contains(t, confirm, first)
			require.Contains(t, confirm, "FAILED")
			require.Contains(t, confirm, "15.00 USD")
			require.Contains(t, confirm, "po_1Abc")
			// A double click sends one POST.
			eval[bool](t, ctx, `(() => { const b = document.getElementById('po-confirm-go'); b.click(); b.click(); return true; })()`)
			until(t, ctx, "sent", `document.getElementById('po-result').textContent.startsWith('Sent to payout-worker')`)
			require.Contains(t, eval[string](t, ctx, `document.getElementById('po-result').className`), "noop")
			require.True(t, eval[bool](t, ctx, `document.getElementById('po-reason').value === '' && document.getElementById('po-resolve-btn').disabled`),
				"sent: the form is cleared, another resolution is a new one")
			var n int
			var rid string
			require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*), max(id::text) FROM payout_resolutions WHERE payout_id = $1`, first).Scan(&n, &rid))
			require.Equal(t, 1, n)
			require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM transaction_outbox WHERE payload->>'resolution_id' = $1
				AND payload->>'outcome' = 'failed' AND payload->>'psp_object_id' = 'po_1Abc' AND payload->>'operator' = 'ops'`, rid).Scan(&n))
			require.Equal(t, 1, n)

			// payout-worker refuses it (the PSP paid): the page shows why.
			fixture.Verdict{ResolutionID: rid, Status: "refused", PSPAnswer: "the PSP says the payout was paid, the operator says failed"}.Insert(t, db.Pool)
			until(t, ctx, "verdict", `document.getElementById('po-result').textContent.startsWith('Refused')`)
			require.Contains(t, text(t, ctx, "#po-result"), "the PSP says the payout was paid")
			require.Contains(t, eval[string](t, ctx, `document.getElementById('po-result').className`), "fail")
			until(t, ctx, "history", `document.getElementById('po-resolutions').textContent.includes('refused')`)
			shot(t, ctx, fmt.Sprintf("payouts-%d", width))

			// Switching payouts clears the dialog and the result.
			clickAt(t, ctx, poRow(second), poRow(second), 40)
			waitPayout(t, ctx, second)
			require.True(t, eval[bool](t, ctx, `document.getElementById('po-result').hidden && document.getElementById('po-reason').value === ''
				&& document.getElementById('po-evidence').value === '' && !document.querySelector('input[name="po-outcome"]:checked')`))
		})
	}
}

// A viewer sees the payouts and the approvals, and no write control.
func TestViewerSeesPayoutsWithoutActions(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	id := reviewPayout(t, db, "NEEDS_REVIEW", time.Now(), 1500)
	url := serve(t, db)
	ctx := browser(t)
	login(t, ctx, url, "/?view=payouts", viewerToken)
	until(t, ctx, "payouts listed", `document.querySelectorAll('#po-rows tr[data-id]').length === 1`)
	clickAt(t, ctx, poRow(id), poRow(id), 40)
	waitPayout(t, ctx, id)
	require.True(t, eval[bool](t, ctx, `document.getElementById('po-resolve').hidden`))
	require.True(t, eval[bool](t, ctx, `Array.from(document.querySelectorAll('.write-po')).every(e => e.offsetParent === null)`))
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('#ap-rows button').length`))
}

// Four eyes: the operator's resolution waits; their own Approve is
// disabled; a second operator approves it and only then is it sent.
func TestSecondOperatorApprovesInTheBrowser(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	id := reviewPayout(t, db, "NEEDS_REVIEW", time.Now(), 1500)
	url := serveWith(t, db, serverConfig{fourEyes: fourEyesConfig{RequireSecondApprover: true, Threshold: 100}})
	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
		return n
	}

	ctx := browser(t)
	login(t, ctx, url, "/?view=payouts", operatorToken)
	clickAt(t, ctx, poRow(id), poRow(id), 40)
	waitPayout(t, ctx, id)
	do(t, ctx, chromedp.Click(chromedp.CSS("#po-paid")),
		chromedp.SendKeys(chromedp.CSS("#po-evidence"), "po_known"),
		chromedp.SendKeys(chromedp.CSS("#po-reason"), "bank statement shows the transfer"))
	until(t, ctx, "resolve enabled", `!document.getElementById('po-resolve-btn').disabled`)
	do(t, ctx, chromedp.Click(chromedp.CSS("#po-resolve-btn")))
	until(t, ctx, "confirmation", `!document.getElementById('po-confirm').hidden`)
	do(t, ctx, chromedp.Click(chromedp.CSS("#po-confirm-go")))
	until(t, ctx, "awaiting", `document.getElementById('po-result').textContent.startsWith('Waiting for a second operator')`)
	until(t, ctx, "approval listed", `document.querySelectorAll('#ap-rows tr[data-id]').length === 1`)
	require.True(t, eval[bool](t, ctx, `document.querySelector('#ap-rows button.primary').disabled`), "not one's own")
	require.Zero(t, count(`SELECT count(*) FROM transaction_outbox`))

	other := browser(t)
	login(t, other, url, "/?view=payouts", secondOperatorToken)
	until(t, other, "approval listed", `document.querySelectorAll('#ap-rows tr[data-id]').length === 1`)
	do(t, other, chromedp.Click(chromedp.CSS("#ap-rows button.primary")))
	until(t, other, "approved", `document.getElementById('ap-result').textContent.includes('approved by sam')`)
	require.Equal(t, 1, count(`SELECT count(*) FROM transaction_outbox WHERE payload->>'payout_id' = $1 AND payload->>'approved_by' = 'sam'`, id))
	until(t, other, "nothing left", `document.querySelectorAll('#ap-rows tr[data-id]').length === 0`)
}
