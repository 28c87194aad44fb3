// Package httpserver holds what every Aegis HTTP server shares: the contract's
// JSON error shape, correlation-id and access-log middleware, the operational
// endpoints (/healthz, /readyz, /metrics) and a graceful Run.
//
// /healthz answers while the process is alive; /readyz answers 200 only while
// every dependency check passes, so a load balancer stops sending work to a
// replica that cannot commit it. Shutdown is two-phase: stop accepting, let
// in-flight requests finish within a deadline, then close hard.
package httpserver
