// Package service is the frame every Aegis binary runs in: SIGINT/SIGTERM
// handling, the settings all services share (DATABASE_URL, HTTP_ADDR,
// LOG_LEVEL, SHUTDOWN_GRACE, SHUTDOWN_DRAIN, ADMIN_ADDR), the JSON logger, and the `migrate` subcommand
// that applies the embedded schema and exits (what `make migrate`, the
// compose migration step and the Kubernetes migrate Job run). `migrate`
// holds a contract migration back until another release runs it
// (migrations.UpGated); `migrate --contract` applies it at once.
//
// ADMIN_ADDR moves /metrics and the detailed /readyz (which names each
// dependency and its error) to a listener of their own, so that only the
// API port need be reachable from outside; HTTP_ADDR then keeps /healthz and
// a /readyz that answers its status code alone (what a load balancer and
// the container healthcheck need).
//
// Base.Run runs a service's components (pkg/lifecycle) in one group and
// stops them in order within SHUTDOWN_GRACE; Base.Listeners are the HTTP
// listeners as components, the first stage to stop. Each run.go reads:
// config → dependencies → components → Run → (deferred) close pools.
//
// Each service's main is one line: service.Main("webhook-api", run). Main
// also answers `--version` (and `version`) with the build's line from
// pkg/buildinfo: the release and commit stamped at link time.
package service
