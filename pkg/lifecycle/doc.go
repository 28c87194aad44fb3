// Package lifecycle is the one shape of everything that runs in the
// background of an Aegis service (ingest committers, notifiers, relay loops,
// the LISTEN listener, consumers, monitors, schedulers, HTTP listeners), and
// the group that runs a service's components and shuts them down in order.
//
// Why: components that each start and stop their own way leave goroutines
// never joined, panic on a second Stop (closing a closed channel), hang a
// stop on an unreachable Postgres (work committed on context.Background()),
// and leave each run.go to order its shutdown by hand. Here a Component is started once and stopped once; a
// second Stop, or a Stop before Start, is harmless; Stop is bounded by its
// context: first a soft stop (take no new work, finish what is in flight),
// then, when the context is done, a hard cancel of the in-flight work; and
// Stop returns only after every goroutine of the component has returned.
//
// The model is River's rivershared/startstop (Start(ctx) that backgrounds
// the service, a Stop that tolerates being called twice or before Start and
// waits for the stop to be complete). Unlike startstop, Stop takes a context
// so that a service's shutdown as a whole fits in SHUTDOWN_GRACE, and a
// component's goroutines see two signals (soft and hard) instead of one.
//
// Run (group.go) starts a service's stages and stops them in order: stop
// taking new work (listeners, consumer fetches), drain in-flight work, flush
// (notifiers, producers); the run.go closes the pools after Run returns.
package lifecycle
