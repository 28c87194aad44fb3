// Package panics turns a panic in one unit of work (a message, a loop
// iteration, a background goroutine) into an error of that unit instead of a
// dead process.
//
// Why: unrecovered, a panic in a consumer's handler kills the worker with a
// batch half done; the next worker gets the same record and dies the same
// way, so one bad message would stop every partition of the group.
// Recovered here, the
// panic is logged with its stack (slog, one line), counted in
// aegis_panics_total{component} so an alert can page on it, and returned as
// an *Error that callers treat as a permanent failure of that message (dead
// letter) or as a reason to restart their loop.
//
// What it relies on: the code that panicked released what it held through
// defers (database.InTx rolls back and re-panics; wallet locks are released
// by defer), so recovering leaves no transaction open. A panic is a bug:
// nothing here retries the same input in place.
package panics
