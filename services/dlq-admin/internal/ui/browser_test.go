package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// chromiumPath finds Debian's chromium. The test does not install it: the
// project's scripts/devdeps.sh does, and a missing browser fails the test
// (never a silent skip, in CI or anywhere).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatal("chromium is not installed; dlq-admin's page is tested in a real headless browser: run scripts/devdeps.sh browser")
	return ""
}

// browser starts headless chromium with a fresh profile for one test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 3*time.Minute)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
	})
	return bctx
}

// until waits for a JavaScript predicate to hold in the page.
func until(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "waiting for %s", what)
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return s
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

func TestOperatorReplaysAndDiscardsInTheBrowser(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	letters := seed(t, db)
	url := serve(t, db)
	ctx := browser(t)
	dbCtx := context.Background()
	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(dbCtx, q, args...).Scan(&n))
		return n
	}

	// The page loads without a token; the operator types one.
	do(t, ctx, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	require.Contains(t, text(t, ctx, "#list-status"), "Enter a token")
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#token"), operatorToken), chromedp.Click(chromedp.CSS("#token-save")))
	row := func(id int64) string { return fmt.Sprintf(`#letters tr[data-id="%d"]`, id) }
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS(row(letters.needsReview))))

	// The list shows every open letter, newest first; the discarded one is
	// filtered out by the default status filter.
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]int64](`Array.from(document.querySelectorAll('#letters tr')).map(r => Number(r.dataset.id))`))
	require.NoError(t, err)
	want := make([]int64, 0, len(letters.open))
	for i := len(letters.open) - 1; i >= 0; i-- {
		want = append(want, letters.open[i])
	}
	require.Equal(t, want, ids)
	until(t, ctx, "stats", `document.getElementById('stat-open').textContent === '`+fmt.Sprint(len(letters.open))+`'`)

	// Open the payout whose PSP answer was lost: history and the payload as
	// an operator sees it (the stored one, credentials hidden).
	do(t, ctx, chromedp.Click(chromedp.CSS(row(letters.needsReview))))
	until(t, ctx, "detail", fmt.Sprintf(`document.getElementById('detail-title').textContent === 'Dead letter #%d'`, letters.needsReview))
	require.Contains(t, text(t, ctx, "#detail-error"), "the PSP may have executed the last attempt")
	history, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#detail-history tr').length`))
	require.NoError(t, err)
	require.Equal(t, 5, history)
	payload := text(t, ctx, "#detail-payload")
	require.Contains(t, payload, `"payout_id": "po-7f3a"`)
	require.Contains(t, payload, `"account_number": "000123456789"`, "an operator sees the account it must check")
	require.NotContains(t, text(t, ctx, "#detail-headers"), "sk_live_do_not_show")

	// Replay it.
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#reason"), "PSP confirmed nothing was paid"), chromedp.Click(chromedp.CSS("#replay-btn")))
	until(t, ctx, "replay answer", `document.getElementById('action-result').textContent.startsWith('202')`)
	require.Contains(t, text(t, ctx, "#action-result"), "replayed as outbox row")
	until(t, ctx, "status badge", `document.getElementById('detail-status').textContent === 'replayed'`)
	require.Equal(t, 1, count(`SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'replayed' AND resolved_by = 'ops'
		AND resolution_reason = 'PSP confirmed nothing was paid' AND replay_count = 1`, letters.needsReview))
	require.Equal(t, 1, count(`SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.transactions' AND headers->>'replay_of' = $1`,
		fmt.Sprint(letters.needsReview)))
	require.Equal(t, 1, count(`SELECT count(*) FROM audit_log WHERE action = 'replay' AND actor = 'ops' AND target_id = $1`,
		fmt.Sprint(letters.needsReview)))
	until(t, ctx, "list refreshed", fmt.Sprintf(`!document.querySelector('%s')`, row(letters.needsReview)))
	shot(t, ctx)

	// Discard the rejected account: without a reason the API says no.
	do(t, ctx, chromedp.Click(chromedp.CSS(row(letters.invalidAccount))))
	until(t, ctx, "detail", fmt.Sprintf(`document.getElementById('detail-title').textContent === 'Dead letter #%d'`, letters.invalidAccount))
	do(t, ctx, chromedp.Click(chromedp.CSS("#discard-btn")))
	until(t, ctx, "discard refused", `document.getElementById('action-result').textContent.startsWith('400 invalid_request')`)
	require.Equal(t, 1, count(`SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'open'`, letters.invalidAccount))
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#reason"), "account closed; customer paid by cheque"), chromedp.Click(chromedp.CSS("#discard-btn")))
	until(t, ctx, "discard answer", `document.getElementById('action-result').textContent.startsWith('200')`)
	until(t, ctx, "resolved note", `!document.getElementById('resolved-note').hidden && document.getElementById('replay-btn').disabled`)
	require.Equal(t, 1, count(`SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'discarded' AND resolved_by = 'ops'
		AND resolution_reason = 'account closed; customer paid by cheque'`, letters.invalidAccount))
	require.Equal(t, 1, count(`SELECT count(*) FROM audit_log WHERE action = 'discard' AND actor = 'ops' AND target_id = $1`,
		fmt.Sprint(letters.invalidAccount)))

	// A poison letter shows as base64 and its replay is refused with the
	// API's reason.
	do(t, ctx, chromedp.Click(chromedp.CSS(row(letters.poison))))
	until(t, ctx, "detail", fmt.Sprintf(`document.getElementById('detail-title').textContent === 'Dead letter #%d'`, letters.poison))
	require.Contains(t, text(t, ctx, "#detail-encoding"), "base64")
	do(t, ctx, chromedp.Click(chromedp.CSS("#replay-btn")))
	until(t, ctx, "replay refused", `document.getElementById('action-result').textContent.startsWith('422 not_replayable')`)
	require.Zero(t, count(`SELECT count(*) FROM transaction_outbox WHERE headers->>'replay_of' = $1`, fmt.Sprint(letters.poison)))
}

// shot takes a screenshot and checks it is a PNG; DLQ_ADMIN_SCREENSHOT
// names a file to keep it in (for a person to look at).
func shot(t *testing.T, ctx context.Context) {
	t.Helper()
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0); document.getElementById('detail').scrollTop = 0`))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dlq-admin-ui.png")
	require.NoError(t, os.WriteFile(path, png, 0o600))
	stored, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(stored), 1000, "a screenshot of a page is not tiny")
	require.True(t, bytes.HasPrefix(stored, []byte("\x89PNG\r\n\x1a\n")), "the screenshot is a PNG")
	if keep := os.Getenv("DLQ_ADMIN_SCREENSHOT"); keep != "" {
		require.NoError(t, os.WriteFile(keep, png, 0o644))
	}
}
