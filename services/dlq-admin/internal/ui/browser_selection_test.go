package ui_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// TestActsOnlyOnTheLetterShown: two stale panels and a double click must
// never act on the wrong letter. A letter whose fetch is slow or fails never becomes
// the one the buttons act on; a late answer for an earlier click does not
// replace the letter shown; result and reason are cleared on every switch;
// a double click on Replay is one replay.
func TestActsOnlyOnTheLetterShown(t *testing.T) {
	t.Parallel()
	forWidths(t, func(t *testing.T, width int) {
		db := pgtest.New(t)
		a := addLetter(t, db, letterSpec{errText: "stripe 503: a"})
		b := addLetter(t, db, letterSpec{errText: "stripe 503: b"})
		c := addLetter(t, db, letterSpec{errText: "stripe 503: c"})
		d := addLetter(t, db, letterSpec{errText: "stripe 503: d"})
		f := newFaults()
		url := serveWith(t, db, serverConfig{faults: f})
		ctx := browserAt(t, width)
		login(t, ctx, url, "/", operatorToken)
		path := func(id int64) string { return fmt.Sprintf("/v1/dead-letters/%d", id) }

		clickRow(t, ctx, a)
		waitTitle(t, ctx, a)
		do(t, ctx, chromedp.SendKeys(chromedp.CSS("#reason"), "typed for a"))

		// B's fetch hangs, then fails: while it hangs nothing can be done,
		// and when it fails nothing is selected.
		hold := make(chan struct{})
		f.set(path(b), fault{hold: hold, status: http.StatusServiceUnavailable})
		clickRow(t, ctx, b)
		until(t, ctx, "loading", `!document.getElementById('detail-loading').hidden`)
		require.True(t, eval[bool](t, ctx, `document.getElementById('replay-btn').disabled && document.getElementById('discard-btn').disabled`),
			"no action while the letter clicked is not shown")
		require.Empty(t, eval[string](t, ctx, `document.getElementById('reason').value`), "the reason typed for #a is gone")
		close(hold)
		until(t, ctx, "error state", `!document.getElementById('detail-failed').hidden`)
		require.Contains(t, text(t, ctx, "#detail-failed"), "503")
		require.Equal(t, fmt.Sprintf("Dead letter #%d could not be loaded", b), text(t, ctx, "#detail-title"))
		require.True(t, eval[bool](t, ctx, `document.getElementById('replay-btn').disabled && document.getElementById('discard-btn').disabled`))
		require.True(t, eval[bool](t, ctx, `document.getElementById('detail-body').hidden`), "nothing of #a stays on screen")
		require.NotContains(t, eval[string](t, ctx, `location.search`), fmt.Sprintf("letter=%d", b))
		require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('#letters tr.selected').length`))
		f.clear(path(b))

		// C's fetch is slow; D is clicked meanwhile and shown; C's late
		// answer is dropped.
		hold = make(chan struct{})
		f.set(path(c), fault{hold: hold})
		clickRow(t, ctx, c)
		until(t, ctx, "loading", `!document.getElementById('detail-loading').hidden`)
		clickRow(t, ctx, d)
		waitTitle(t, ctx, d)
		close(hold)
		do(t, ctx, chromedp.Sleep(300*time.Millisecond))
		waitTitle(t, ctx, d)
		require.Contains(t, text(t, ctx, "#detail-error"), "stripe 503: d")
		f.clear(path(c))

		// Discard D; its result goes when another letter is opened.
		do(t, ctx, chromedp.Click(chromedp.CSS("#discard-btn")))
		until(t, ctx, "confirmation", `!document.getElementById('confirm').hidden`)
		do(t, ctx, chromedp.SendKeys(chromedp.CSS("#reason"), "duplicate of a"), chromedp.Click(chromedp.CSS("#confirm-go")))
		until(t, ctx, "discarded", `document.getElementById('action-result').textContent.startsWith('200')`)
		require.True(t, eval[bool](t, ctx, inView("#action-result")))
		// The list drops D once it refreshes, and the rows below it move
		// up: click A only after that, or the click can land where A was.
		until(t, ctx, "the list without D", fmt.Sprintf(`document.querySelector(%q) === null`, row(d)))
		clickRow(t, ctx, a)
		waitTitle(t, ctx, a)
		require.True(t, eval[bool](t, ctx, `document.getElementById('action-result').hidden && document.getElementById('action-result').textContent === ''`))
		require.Empty(t, eval[string](t, ctx, `document.getElementById('reason').value`))
		require.True(t, eval[bool](t, ctx, `document.getElementById('confirm').hidden`))

		// A double click on Replay is one replay, shown as a success (not a
		// 409 after it).
		do(t, ctx, chromedp.DoubleClick(chromedp.CSS("#replay-btn")))
		until(t, ctx, "replayed", `document.getElementById('action-result').textContent.startsWith('202')`)
		do(t, ctx, chromedp.Sleep(300*time.Millisecond))
		require.Equal(t, "result ok", eval[string](t, ctx, `document.getElementById('action-result').className`))
		require.Equal(t, 1, count(t, db, `SELECT count(*) FROM audit_log WHERE action = 'replay' AND target_id = $1`, fmt.Sprint(a)))
		require.Equal(t, 1, count(t, db, `SELECT count(*) FROM transaction_outbox WHERE headers->>'replay_of' = $1`, fmt.Sprint(a)))

		// Only A and D were acted on: never the letters whose fetch failed or was superseded.
		require.Equal(t, 2, count(t, db, `SELECT count(*) FROM audit_log`))
		require.Equal(t, 2, count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'open' AND id = ANY($1)`, []int64{b, c}))
		require.Equal(t, 1, count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'discarded' AND id = $1`, d))
	})
}
