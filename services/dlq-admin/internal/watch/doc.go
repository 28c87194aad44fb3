// Package watch is the one ticker loop dlq-admin's watchers (the
// dead-letter depth and alert sweep, consumer stalls, PSP reconciliation
// alerts) run on, each on a loop of its own: each task runs once at start, so a restarted service looks at once, then on
// its interval and whenever it is woken, until the context ends.
//
// Tasks of one loop run one at a time, in the order given, on the loop's
// goroutine: a slow task delays the others but never overlaps itself, and
// a tick missed while a task runs is not made up (one late run, not a
// burst). A failed run is reported (unless the context ended) and retried
// on the next tick: a watcher outlives a Postgres or Kafka outage.
package watch
