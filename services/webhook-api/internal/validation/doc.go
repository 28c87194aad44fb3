// Package validation is how webhook-api's request parsers say what a client
// got wrong: a field and a message, answered 400 invalid_request. It also
// holds the text checks every stored field passes, so that nothing a client
// sends reaches Postgres in a form Postgres refuses (which would be a 503
// the client retries forever instead of a 400 it can fix).
package validation
