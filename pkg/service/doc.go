// Package service is the frame every Aegis binary runs in: SIGINT/SIGTERM
// handling, the settings all services share (DATABASE_URL, HTTP_ADDR,
// LOG_LEVEL, SHUTDOWN_GRACE), the JSON logger, and the `migrate` subcommand
// that applies the embedded schema and exits (what `make migrate` and the
// compose migration step run).
//
// Each service's main is one line: service.Main("webhook-api", run).
package service
