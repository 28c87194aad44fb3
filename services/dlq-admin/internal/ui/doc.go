// Package ui serves dlq-admin's page for people: the ops console. A small
// HTML, CSS and JS application, embedded in the binary, that lists dead
// letters by what they are about (payout or PSP event, user, amount), groups
// them by error, shows one with its payout and history, replays or discards
// it (or many, through a previewed, audited bulk action) with a reason.
//
// The page holds no data and needs no token: everything it shows comes
// from the /v1 API, called with the token the operator types (kept in
// sessionStorage, so it leaves with the tab). So the page can show nothing
// the API would not, redaction and roles included, and the API stays the
// one thing to secure and test. GET /v1/me tells it the role, so a viewer
// never sees a write control.
//
// It acts only on the letter it shows: a letter is selected once its fetch
// succeeded, answers to superseded requests are dropped, and buttons are
// disabled while their request runs, so a stale panel can never act on a
// letter other than the one it shows. Filters and the open letter live in the URL.
//
// The Content-Security-Policy allows scripts, styles and requests from this
// origin only, and no inline script or style: the JS is a file, and it
// builds the DOM with textContent, never HTML strings, so a payload
// carrying markup is shown as text. No framework and no build step: the
// page is small enough to read in one sitting, nothing is fetched at run
// time, and there is nothing to keep up to date. docs/console describes it.
package ui
