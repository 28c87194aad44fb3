// Package errclass attaches a retry class to errors so that retry decisions
// read a property instead of matching strings.
//
// Transient errors (timeouts, refused connections, 429, 5xx, deadlocks, an
// open breaker) are retried with backoff; permanent ones (bad payload, invalid
// account, 4xx business errors) go to the dead-letter store at once. Classes
// survive wrapping: Of uses errors.As, never a type assertion, so
// fmt.Errorf("call psp: %w", err) keeps the class. An unclassified error is
// treated as transient: retrying something harmless a bounded number of times
// is safer than dead-lettering money on a guess.
package errclass
