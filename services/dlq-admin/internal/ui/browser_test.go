package ui_test

import (
	"bytes"
	"context"
	"flag"
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

// update writes the page's screenshots into docs/console (go test -run
// Screenshots ./internal/ui/ -update); without it they are only checked.
var update = flag.Bool("update", false, "write the console screenshots into docs/console")

// widths are the window widths the page is tested at: a laptop and a
// narrow window (where the letter opens in a drawer).
var widths = []int{1400, 900}

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

// browser starts headless chromium 1400 px wide with a fresh profile.
func browser(t *testing.T) context.Context { return browserAt(t, 1400) }

// browserAt starts headless chromium width px wide with a fresh profile for
// one test.
func browserAt(t *testing.T, width int) context.Context {
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
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, 1000),
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
	if err != nil {
		// Say what the page shows, to tell a slow page from a wrong one.
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.search + ' | ' + document.getElementById('list-status').textContent +
			' | rows ' + Array.from(document.querySelectorAll('#letters tr')).map(r => r.dataset.id).join(',') +
			' | ' + document.getElementById('detail-title').textContent + ' | ' + document.getElementById('banner').textContent`))
		require.NoError(t, err, "waiting for %s; the page: %s", what, page)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return s
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// clickRow clicks letter id's row near its left end, the part a drawer
// (900 px) leaves uncovered, as a person would.
func clickRow(t *testing.T, ctx context.Context, id int64) {
	t.Helper()
	clickAt(t, ctx, row(id), row(id), 55)
}

// clickAt clicks sel with the mouse, dx pixels from its left edge (its
// centre when dx is 0), once the point is really on target (the closest
// ancestor matching it, so a row or the box itself), retrying while a
// refresh redraws the list.
func clickAt(t *testing.T, ctx context.Context, sel, target string, dx float64) {
	t.Helper()
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS(sel)))
	point := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return null;
		e.scrollIntoView({block: 'center'}); const b = e.getBoundingClientRect(); const x = %v ? b.left + %v : b.left + b.width / 2, y = b.top + b.height / 2;
		const hit = document.elementFromPoint(x, y); return hit && hit.closest(%q) === document.querySelector(%q) ? [x, y] : null; })()`,
		sel, dx, dx, target, target)
	xy, err := chromedp.Run(ctx, chromedp.Poll[[]float64](point, chromedp.WithPollingInterval(20*time.Millisecond),
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "%s can be clicked", sel)
	require.Len(t, xy, 2, "%s can be clicked", sel)
	do(t, ctx, chromedp.MouseClickXY(xy[0], xy[1]))
}

func row(id int64) string { return fmt.Sprintf(`#letters tr[data-id="%d"]`, id) }

// login opens path on the page and uses token.
func login(t *testing.T, ctx context.Context, url, path, token string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(url+path), chromedp.WaitVisible(chromedp.CSS("#token")))
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#token-save")))
	until(t, ctx, "who am I", `!document.getElementById('me').hidden`)
	// The first refresh (list and stats) is done: the layout is settled.
	until(t, ctx, "first refresh", `document.getElementById('as-of').textContent.startsWith('as of')`)
}

func waitTitle(t *testing.T, ctx context.Context, id int64) {
	t.Helper()
	until(t, ctx, fmt.Sprintf("letter #%d", id),
		fmt.Sprintf(`document.getElementById('detail-title').textContent === 'Dead letter #%d' && !document.getElementById('detail').hasAttribute('aria-busy')`, id))
}

// inView is true when the element is wholly inside the viewport.
func inView(sel string) string {
	return fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect();
		return r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; })()`, sel)
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
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS(row(letters.needsReview))))

	// The list shows every open letter, newest first; the discarded one is
	// filtered out by the default status filter.
	ids := eval[[]int64](t, ctx, `Array.from(document.querySelectorAll('#letters tr')).map(r => Number(r.dataset.id))`)
	want := make([]int64, 0, len(letters.open))
	for i := len(letters.open) - 1; i >= 0; i-- {
		want = append(want, letters.open[i])
	}
	require.Equal(t, want, ids)
	until(t, ctx, "stats", `document.getElementById('stat-open').textContent === '`+fmt.Sprint(len(letters.open))+`'`)

	// Open the payout whose PSP answer was lost: history and the payload as
	// an operator sees it (the stored one, credentials hidden).
	do(t, ctx, chromedp.Click(chromedp.CSS(row(letters.needsReview))))
	waitTitle(t, ctx, letters.needsReview)
	require.Contains(t, text(t, ctx, "#detail-error"), "the PSP may have executed the last attempt")
	require.Equal(t, 5, eval[int](t, ctx, `document.querySelectorAll('#detail-history tr').length`))
	payload := text(t, ctx, "#detail-payload")
	require.Contains(t, payload, `"payout_id": "po-7f3a"`)
	require.Contains(t, payload, `"account_number": "000123456789"`, "an operator sees the account it must check")
	require.NotContains(t, text(t, ctx, "#detail-headers"), "sk_live_do_not_show")

	// Replay it (transient: no confirmation needed).
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#reason"), "PSP confirmed nothing was paid"), chromedp.Click(chromedp.CSS("#replay-btn")))
	until(t, ctx, "replay answer", `document.getElementById('action-result').textContent.startsWith('202')`)
	require.Contains(t, text(t, ctx, "#action-result"), "republished as outbox row")
	until(t, ctx, "status badge", `document.getElementById('detail-status').textContent === 'replayed'`)
	require.Equal(t, 1, count(`SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'replayed' AND resolved_by = 'ops'
		AND resolution_reason = 'PSP confirmed nothing was paid' AND replay_count = 1`, letters.needsReview))
	require.Equal(t, 1, count(`SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.transactions' AND headers->>'replay_of' = $1`,
		fmt.Sprint(letters.needsReview)))
	require.Equal(t, 1, count(`SELECT count(*) FROM audit_log WHERE action = 'replay' AND actor = 'ops' AND target_id = $1`,
		fmt.Sprint(letters.needsReview)))
	until(t, ctx, "list refreshed", fmt.Sprintf(`!document.querySelector('%s')`, row(letters.needsReview)))
	shot(t, ctx, "")

	// Discard the rejected account: it asks to confirm with the count, and
	// without a reason nothing is sent.
	do(t, ctx, chromedp.Click(chromedp.CSS(row(letters.invalidAccount))))
	waitTitle(t, ctx, letters.invalidAccount)
	do(t, ctx, chromedp.Click(chromedp.CSS("#discard-btn")))
	until(t, ctx, "confirmation", `!document.getElementById('confirm').hidden`)
	require.Contains(t, text(t, ctx, "#confirm-text"), fmt.Sprintf("Discard 1 letter (#%d, payout po-91bc)", letters.invalidAccount))
	do(t, ctx, chromedp.Click(chromedp.CSS("#confirm-go")))
	until(t, ctx, "reason asked", `document.getElementById('action-result').textContent.includes('A reason is required')`)
	require.Zero(t, count(`SELECT count(*) FROM audit_log WHERE target_id = $1`, fmt.Sprint(letters.invalidAccount)))
	require.Equal(t, 1, count(`SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'open'`, letters.invalidAccount))
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#reason"), "account closed; customer paid by cheque"), chromedp.Click(chromedp.CSS("#confirm-go")))
	until(t, ctx, "discard answer", `document.getElementById('action-result').textContent.startsWith('200')`)
	until(t, ctx, "resolved note", `!document.getElementById('resolved-note').hidden && document.getElementById('replay-btn').disabled`)
	require.Equal(t, 1, count(`SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'discarded' AND resolved_by = 'ops'
		AND resolution_reason = 'account closed; customer paid by cheque'`, letters.invalidAccount))
	require.Equal(t, 1, count(`SELECT count(*) FROM audit_log WHERE action = 'discard' AND actor = 'ops' AND target_id = $1`,
		fmt.Sprint(letters.invalidAccount)))

	// A poison letter shows as base64 and its replay is refused with the
	// API's reason.
	do(t, ctx, chromedp.Click(chromedp.CSS(row(letters.poison))))
	waitTitle(t, ctx, letters.poison)
	require.Contains(t, text(t, ctx, "#detail-encoding"), "base64")
	require.Contains(t, text(t, ctx, "#replay-would"), "Not replayable")
	do(t, ctx, chromedp.Click(chromedp.CSS("#replay-btn")))
	until(t, ctx, "replay refused", `document.getElementById('action-result').textContent.startsWith('422 not_replayable')`)
	require.Zero(t, count(`SELECT count(*) FROM transaction_outbox WHERE headers->>'replay_of' = $1`, fmt.Sprint(letters.poison)))
}

// shot takes a screenshot and checks it is a PNG. With -update and a name
// it is written to docs/console/<name>.png; DLQ_ADMIN_SCREENSHOT names a
// file to keep an unnamed one in.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dlq-admin-ui.png")
	require.NoError(t, os.WriteFile(path, png, 0o600))
	stored, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(stored), 1000, "a screenshot of a page is not tiny")
	require.True(t, bytes.HasPrefix(stored, []byte("\x89PNG\r\n\x1a\n")), "the screenshot is a PNG")
	if name != "" && *update {
		dir := filepath.Join("..", "..", "..", "..", "docs", "console")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	}
	if keep := os.Getenv("DLQ_ADMIN_SCREENSHOT"); keep != "" && name == "" {
		require.NoError(t, os.WriteFile(keep, png, 0o644))
	}
}

// forWidths runs f at each tested width, each in its own browser.
func forWidths(t *testing.T, f func(t *testing.T, width int)) {
	for _, w := range widths {
		t.Run(fmt.Sprintf("%dpx", w), func(t *testing.T) {
			t.Parallel()
			f(t, w)
		})
	}
}
