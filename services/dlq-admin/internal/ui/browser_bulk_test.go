package ui_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// TestBulkReplayJobAndBulkDiscard: "all matching the filter" → dry-run
// count → confirm with a reason → a replay job followed live, cancelled
// half way; then two picked rows discarded with one reason, audited per
// letter.
func TestBulkReplayJobAndBulkDiscard(t *testing.T) {
	t.Parallel()
	forWidths(t, func(t *testing.T, width int) {
		db := pgtest.New(t)
		s := seedTriage(t, db)
		// Two letters a second: slow enough to watch and cancel.
		base := serveWith(t, db, serverConfig{runnerRate: 2})
		ctx := browserAt(t, width)
		login(t, ctx, base, "/?error_class=permanent", operatorToken)
		until(t, ctx, "permanent letters", `document.querySelectorAll('#letters tr').length === 9`)

		// Every open permanent letter (the page shows them all here, but
		// the count is the API's).
		do(t, ctx, chromedp.Click(chromedp.CSS("#bulk-all")))
		until(t, ctx, "all selected", `document.getElementById('bulk-count').textContent === 'All 9 open letters matching the filter selected'`)
		do(t, ctx, chromedp.Click(chromedp.CSS("#bulk-replay")))
		until(t, ctx, "dry run", `!document.getElementById('bulk-confirm').hidden`)
		require.Contains(t, text(t, ctx, "#bulk-preview"), "Dry run: replay 9 letters (9 open matches)")
		require.Equal(t, "Replay 9 letters", text(t, ctx, "#bulk-go"))
		require.True(t, eval[bool](t, ctx, `document.getElementById('bulk-go').disabled`), "no bulk action without a reason")
		require.Zero(t, count(t, db, `SELECT count(*) FROM replay_jobs`), "a dry run changes nothing")
		do(t, ctx, chromedp.SendKeys(chromedp.CSS("#bulk-reason"), "stripe fixed account validation"), chromedp.Click(chromedp.CSS("#bulk-go")))
		until(t, ctx, "job followed", `!document.getElementById('job').hidden && /^Replay job #\d+$/.test(document.getElementById('job-title').textContent)`)
		until(t, ctx, "progress", `document.getElementById('job-progress').value >= 1`)
		require.Contains(t, text(t, ctx, "#job-text"), "of 9 handled")
		if width == 1400 {
			shot(t, ctx, "bulk-job")
		}
		do(t, ctx, chromedp.Click(chromedp.CSS("#job-cancel")))
		until(t, ctx, "cancelled", `document.getElementById('job-status').textContent === 'cancelled'`)
		require.True(t, eval[bool](t, ctx, `document.getElementById('job-cancel').hidden`))
		require.Equal(t, 1, count(t, db, `SELECT count(*) FROM replay_jobs WHERE status = 'cancelled' AND reason = 'stripe fixed account validation'
			AND filter->>'error_class' = 'permanent' AND max = 10000`))
		handled := count(t, db, `SELECT count(*) FROM dead_letters WHERE status <> 'open'`)
		require.Greater(t, handled, 0)
		require.Less(t, handled, 9, "cancelled before the end")
		require.Equal(t, 1, count(t, db, `SELECT count(*) FROM audit_log WHERE action = 'bulk_replay'`))

		// Pick two open rows and discard them with one reason.
		do(t, ctx, chromedp.Click(chromedp.CSS("#f-reset")))
		until(t, ctx, "reset", `document.querySelectorAll('#letters tr').length === `+fmt.Sprint(10-handled))
		clickAt(t, ctx, row(s.bobs)+" .pick", row(s.bobs)+" .pick", 0)
		clickAt(t, ctx, row(s.event)+" .pick", row(s.event)+" .pick", 0)
		until(t, ctx, "picked", `document.getElementById('bulk-count').textContent === '2 selected'`)
		require.True(t, eval[bool](t, ctx, `document.getElementById('detail').hidden`), "picking a row does not open it")
		do(t, ctx, chromedp.Click(chromedp.CSS("#bulk-discard")))
		until(t, ctx, "dry run", `!document.getElementById('bulk-confirm').hidden`)
		require.Contains(t, text(t, ctx, "#bulk-preview"), "Dry run: discard 2 letters")
		require.Equal(t, "Discard 2 letters", text(t, ctx, "#bulk-go"))
		do(t, ctx, chromedp.SendKeys(chromedp.CSS("#bulk-reason"), "handled by hand in the PSP dashboard"), chromedp.Click(chromedp.CSS("#bulk-go")))
		until(t, ctx, "discarded", `document.getElementById('bulk-result').textContent.startsWith('200 OK: 2 letters discarded')`)
		require.Equal(t, "result ok", eval[string](t, ctx, `document.getElementById('bulk-result').className`))
		require.Equal(t, 2, count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'discarded' AND id = ANY($1)
			AND resolution_reason = 'handled by hand in the PSP dashboard'`, []int64{s.bobs, s.event}))
		require.Equal(t, 2, count(t, db, `SELECT count(*) FROM audit_log WHERE action = 'discard' AND reason = 'handled by hand in the PSP dashboard'`))
		require.Equal(t, 2, count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'discarded'`), "nothing else")
		until(t, ctx, "list refreshed", fmt.Sprintf(`!document.querySelector('%s')`, row(s.bobs)))

		// One picked row replayed as a job of exactly that letter.
		var pick int64
		require.NoError(t, db.Pool.QueryRow(context.Background(),
			`SELECT max(id) FROM dead_letters WHERE status = 'open' AND id = ANY($1)`, s.invalid).Scan(&pick))
		clickAt(t, ctx, row(pick)+" .pick", row(pick)+" .pick", 0)
		until(t, ctx, "picked", `document.getElementById('bulk-count').textContent === '1 selected'`)
		do(t, ctx, chromedp.Click(chromedp.CSS("#bulk-replay")))
		until(t, ctx, "dry run", `!document.getElementById('bulk-confirm').hidden`)
		require.Contains(t, text(t, ctx, "#bulk-preview"), fmt.Sprintf("Dry run: replay 1 letter (1 open match), starting with #%d.", pick))
		do(t, ctx, chromedp.SendKeys(chromedp.CSS("#bulk-reason"), "this one only"), chromedp.Click(chromedp.CSS("#bulk-go")))
		until(t, ctx, "job done", `document.getElementById('job-status').textContent === 'done'`)
		require.Contains(t, text(t, ctx, "#job-text"), "1 of 1 handled")
		require.Equal(t, 1, count(t, db, `SELECT count(*) FROM replay_jobs WHERE reason = 'this one only' AND filter->'ids' = $1::jsonb`, fmt.Sprintf("[%d]", pick)))
		require.Equal(t, 1, count(t, db, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'replayed'`, pick))
		require.Equal(t, handled+3, count(t, db, `SELECT count(*) FROM dead_letters WHERE status <> 'open'`), "nothing else was touched")
	})
}
