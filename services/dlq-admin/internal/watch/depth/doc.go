// Package depth makes dead letters impossible to miss (the third promise,
// docs/design/architecture.md, "Promises": every failure ends somewhere a
// person can see): it raises an
// alert for every new dead letter, keeps Prometheus gauges of the store's
// depth and oldest open age, and alerts when a topic's open depth passes a
// threshold.
//
// New letters are found in Postgres, not in the consumer's memory: every
// letter starts with dead_letters.alert_pending set (migration 000002), and
// the sweep claims pending rows with FOR UPDATE SKIP LOCKED, raises their
// alerts and clears the flag in one transaction. So the relay's and
// ingest's letters, which never pass through dlq-admin's consumer, alert
// too; several replicas never alert one letter twice; and a crash between
// raising and committing alerts again rather than never. The consumer
// wakes the sweep after storing new letters, so the alert is prompt; a
// periodic sweep finds the rest.
//
// dlq-admin is the only service that pages for dead letters: the payout
// worker, the relay and ingest only log and count the letters they write
// (pkg/dlq.Writer), so one letter is one page.
//
// Alerts go through pkg/alert (alert.DeadLetterKey, alert.DLQDepthKey):
// a log line per letter. What pages is the open letters by topic and class
// (aegis_dlq_open_letters, refreshed at each check): a burst of a thousand
// letters of one kind is one page, which resolves when they are resolved.
// Alert details carry ids, topic, class, error and correlation id, never
// payloads or headers.
package depth
