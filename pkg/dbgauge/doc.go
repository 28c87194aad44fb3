// Package dbgauge exports gauges whose figures live in Postgres, read when
// Prometheus scrapes: every replica of a service then exports the same,
// current figure (rules take max), whichever replica wrote it, and a
// replica that restarts exports it at once instead of a zero or nothing
// until its next round. A read is bounded (Timeout); one that fails or
// times out exports nothing for that scrape, never a zero a rule would
// take for a figure, and is logged.
package dbgauge
