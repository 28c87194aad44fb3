package ui_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// contrastJS defines ratio(a, b): the WCAG contrast of two CSS colours.
const contrastJS = `
	const lum = (c) => { const m = c.match(/[\d.]+/g).map(Number).slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
		return 0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]; };
	const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
	const css = (sel, prop) => getComputedStyle(document.querySelector(sel))[prop];
`

// minFieldContrast is the lowest contrast of an input border against the
// panel around it and the input's own background.
const minFieldContrast = `(() => {` + contrastJS + `
	return Math.min(ratio(css('#f-payout', 'borderTopColor'), css('.filters', 'backgroundColor')),
		ratio(css('#f-payout', 'borderTopColor'), css('#f-payout', 'backgroundColor')),
		ratio(css('#reason', 'borderTopColor'), css('.actions', 'backgroundColor'))); })()`

// bodyLuminance tells a dark page from a light one.
const bodyLuminance = `(() => {` + contrastJS + ` return lum(css('body', 'backgroundColor')); })()`

// unnamed lists visible controls without an accessible name.
const unnamed = `Array.from(document.querySelectorAll('button, input, select, textarea, #letters tr'))
	.filter((e) => e.getClientRects().length > 0)
	.filter((e) => {
		const by = e.getAttribute('aria-labelledby');
		const name = (e.getAttribute('aria-label') || (by ? by.split(' ').map((i) => document.getElementById(i).textContent).join(' ') : '') ||
			(e.labels ? Array.from(e.labels).map((l) => l.textContent).join(' ') : '') ||
			(e.tagName === 'BUTTON' ? e.textContent : '') || e.title || '').trim();
		return !name;
	}).map((e) => e.id || e.outerHTML.slice(0, 60))`

// TestKeyboardURLRefreshTimeZoneAndTheme: rows are focusable and j/k/Enter/
// Esc work; filters and the open letter are in the URL and back/forward
// replay them; the page refreshes itself, says as of when, and raises a
// banner when a refresh fails; one time zone throughout (UTC by default,
// local on request, remembered); the letter is in view (a drawer at
// 900 px); controls have names, input borders >= 3:1, and a dark theme
// follows the system or the toggle.
func TestKeyboardURLRefreshTimeZoneAndTheme(t *testing.T) {
	t.Parallel()
	forWidths(t, func(t *testing.T, width int) {
		db := pgtest.New(t)
		s := seedTriage(t, db)
		f := newFaults()
		base := serveWith(t, db, serverConfig{faults: f})
		ctx := browserAt(t, width)
		login(t, ctx, base, "/?refresh=1", operatorToken)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(row(s.bobs))))
		ids := eval[[]int64](t, ctx, `Array.from(document.querySelectorAll('#letters tr')).map(r => Number(r.dataset.id))`)
		require.Len(t, ids, 10)
		require.Empty(t, eval[[]string](t, ctx, unnamed), "every control has an accessible name")
		require.GreaterOrEqual(t, eval[float64](t, ctx, minFieldContrast), 3.0, "input borders (light)")

		// Keyboard: j, j, k, Enter, Esc.
		do(t, ctx, chromedp.KeyEvent("j"))
		until(t, ctx, "first row focused", fmt.Sprintf(`document.activeElement.dataset.id === '%d'`, ids[0]))
		do(t, ctx, chromedp.KeyEvent("j"), chromedp.KeyEvent("j"), chromedp.KeyEvent("k"))
		until(t, ctx, "second row focused", fmt.Sprintf(`document.activeElement.dataset.id === '%d'`, ids[1]))
		do(t, ctx, chromedp.KeyEvent(kb.Enter))
		waitTitle(t, ctx, ids[1])
		until(t, ctx, "letter in the URL", fmt.Sprintf(`location.search === '?refresh=1&letter=%d' || location.search === '?letter=%d&refresh=1'`, ids[1], ids[1]))
		require.True(t, eval[bool](t, ctx, inView("#detail-title")), "the letter is in view")
		require.True(t, eval[bool](t, ctx, inView("#replay-btn")), "its actions are in view")
		if width == 900 {
			require.Equal(t, "fixed", eval[string](t, ctx, `getComputedStyle(document.getElementById('detail')).position`), "a drawer at 900 px")
		} else {
			require.True(t, eval[bool](t, ctx, `document.getElementById('detail').getBoundingClientRect().left >= document.getElementById('list-section').getBoundingClientRect().right`),
				"side by side at 1400 px")
		}
		require.GreaterOrEqual(t, eval[float64](t, ctx, minFieldContrast), 3.0)
		do(t, ctx, chromedp.KeyEvent(kb.Escape))
		until(t, ctx, "closed", `document.getElementById('detail').hidden && !location.search.includes('letter=')`)

		// URL: open a letter, filter, then back and forward.
		clickRow(t, ctx, s.bobs)
		waitTitle(t, ctx, s.bobs)
		if width == 900 {
			do(t, ctx, chromedp.Click(chromedp.CSS("#detail-close")))
		}
		do(t, ctx, chromedp.SendKeys(chromedp.CSS("#f-user"), "bob"), chromedp.Click(chromedp.CSS("#f-apply")))
		until(t, ctx, "filtered", `document.querySelectorAll('#letters tr').length === 1 && location.search.includes('user=bob')`)
		do(t, ctx, chromedp.NavigateBack())
		until(t, ctx, "back: unfiltered", `document.getElementById('f-user').value === '' && document.querySelectorAll('#letters tr').length === 10`)
		if width == 900 {
			// The drawer was closed before filtering: one more step back opens it.
			require.True(t, eval[bool](t, ctx, `document.getElementById('detail').hidden`))
			do(t, ctx, chromedp.NavigateBack())
		}
		waitTitle(t, ctx, s.bobs)
		do(t, ctx, chromedp.NavigateBack())
		until(t, ctx, "back: closed", `document.getElementById('detail').hidden`)
		do(t, ctx, chromedp.NavigateForward())
		waitTitle(t, ctx, s.bobs)
		do(t, ctx, chromedp.NavigateForward())
		if width == 900 {
			do(t, ctx, chromedp.NavigateForward())
		}
		until(t, ctx, "forward: filtered again", `document.getElementById('f-user').value === 'bob' && document.querySelectorAll('#letters tr').length === 1`)
		if width == 900 {
			require.True(t, eval[bool](t, ctx, `document.getElementById('detail').hidden`))
		} else {
			waitTitle(t, ctx, s.bobs)
		}
		do(t, ctx, chromedp.Click(chromedp.CSS("#f-reset")))
		until(t, ctx, "reset", `document.querySelectorAll('#letters tr').length === 10`)

		// Auto-refresh: a new letter appears by itself; a failing refresh
		// raises the banner, which goes when refreshes work again.
		asOf := text(t, ctx, "#as-of")
		require.Regexp(t, `^as of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC · every 1s$`, asOf)
		late := addLetter(t, db, letterSpec{user: "carol", errText: "stripe 502: bad gateway"})
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(row(late))))
		until(t, ctx, "stats refreshed", `document.getElementById('stat-open').textContent === '11'`)
		f.set("/v1/dead-letters", fault{status: http.StatusServiceUnavailable})
		until(t, ctx, "banner", `!document.getElementById('banner').hidden`)
		require.Contains(t, text(t, ctx, "#banner"), "Refresh failed: 503 unavailable")
		require.Contains(t, text(t, ctx, "#banner"), "What you see is as of")
		require.Equal(t, "alert", eval[string](t, ctx, `document.getElementById('banner').getAttribute('role')`))
		f.clear("/v1/dead-letters")
		until(t, ctx, "banner gone", `document.getElementById('banner').hidden`)
		// A refresh that hangs (no error to show) turns stale after three periods.
		hold := make(chan struct{})
		f.set("/v1/dead-letters", fault{hold: hold})
		until(t, ctx, "stale banner", `document.getElementById('banner').textContent.startsWith('Stale: the last successful refresh was ')`)
		f.clear("/v1/dead-letters")
		close(hold)
		until(t, ctx, "fresh again", `document.getElementById('banner').hidden`)

		// Time zone: UTC by default, local when chosen, remembered.
		require.Regexp(t, `UTC$`, eval[string](t, ctx, `document.querySelector('`+row(s.bobs)+` td.age').title`))
		_, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"})
		require.NoError(t, err)
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('tz'); s.value = 'local'; s.dispatchEvent(new Event('change')); })()`))
		until(t, ctx, "local times", `document.querySelector('`+row(s.bobs)+` td.age').title.endsWith('+05:30')`)
		require.Regexp(t, `^\(local, Asia/(Kolkata|Calcutta)\)$`, text(t, ctx, ".tz-name"))
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('f-since').value = '2026-11-20T10:00:00'`), chromedp.Click(chromedp.CSS("#f-apply")))
		until(t, ctx, "since in UTC in the URL", `new URLSearchParams(location.search).get('since') === '2026-11-20T04:30:00Z'`)
		do(t, ctx, chromedp.Reload())
		until(t, ctx, "remembered", `document.getElementById('tz').value === 'local' && document.getElementById('f-since').value.startsWith('2026-11-20T10:00')`)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(row(s.bobs))))

		// Theme: the system's dark, then the toggle, remembered.
		require.Greater(t, eval[float64](t, ctx, bodyLuminance), 0.5, "light by default")
		_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		require.NoError(t, err)
		until(t, ctx, "dark from the system", bodyLuminance+` < 0.05`)
		require.GreaterOrEqual(t, eval[float64](t, ctx, minFieldContrast), 3.0, "input borders (dark)")
		require.Empty(t, eval[[]string](t, ctx, unnamed))
		do(t, ctx, chromedp.Click(chromedp.CSS("#theme")), chromedp.Click(chromedp.CSS("#theme")))
		until(t, ctx, "light by choice", `document.getElementById('theme').textContent === 'Theme: light' && `+bodyLuminance+` > 0.5`)
		do(t, ctx, chromedp.Reload())
		until(t, ctx, "remembered", `document.getElementById('theme').textContent === 'Theme: light' && `+bodyLuminance+` > 0.5`)
	})
}
