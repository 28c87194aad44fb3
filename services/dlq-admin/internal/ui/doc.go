// Package ui serves dlq-admin's page for people: a small HTML, CSS and JS
// application, embedded in the binary, that lists and filters dead letters,
// shows one with its history and redacted payload, and replays or discards
// it with a reason.
//
// The page holds no data and needs no token: everything it shows comes
// from the /v1 API, called with the token the operator types (kept in
// sessionStorage, so it leaves with the tab). So the page can show nothing
// the API would not, redaction and roles included, and the API stays the
// one thing to secure and test.
//
// The Content-Security-Policy allows scripts, styles and requests from this
// origin only, and no inline script or style: the JS is a file, and it
// builds the DOM with textContent, never HTML strings, so a payload
// carrying markup is shown as text. No framework: the page is small enough
// to read in one sitting, and there is nothing to keep up to date.
package ui
