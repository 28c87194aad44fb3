// Package httpserver holds what every Aegis HTTP server shares: the contract's
// JSON error shape, correlation-id and access-log middleware, the operational
// endpoints (/healthz, /readyz, /metrics) and a graceful Run.
//
// /healthz answers while the process is alive; /readyz answers 200 only while
// every dependency check passes, so a load balancer stops sending work to a
// replica that cannot commit it, and 503 from the moment the server is
// stopping. Shutdown is in phases: /readyz answers 503 and the listener
// keeps serving for the drain (ServeDraining; none by default), then it
// stops accepting, lets in-flight requests finish within what is left of
// the deadline, then closes hard.
package httpserver
