// Package alert is Aegis's one alerting interface (docs/design/architecture.md,
// promise 3: every failure ends somewhere a person sees it).
//
// Raise always writes a structured log line and counts the alert in
// aegis_alerts_total, so Prometheus and Alertmanager see everything. When a
// webhook sink is configured (ALERT_WEBHOOK_URL) it also sends the alert as
// JSON a Slack incoming webhook, a PagerDuty Events v2 endpoint or a generic
// receiver accepts — de-duplicated per alert key within a window, so a burst
// of a thousand dead letters pages once (and says how many it folded).
//
// Raise never blocks its caller on the network: deliveries go through a
// bounded queue to a background sender, which retries a few times and then
// drops (the log line and the metric already recorded the alert).
//
// One thing pages once, from one service. Alert keys name the thing (the
// topic and class of dead letters, a partition, a user), never the service
// that noticed it, and are built in keys.go only; the PagerDuty dedup_key is
// the key alone, so the same key raised by two services is one incident.
// Each kind has one owner: dlq-admin pages for dead letters (once per
// letter it stores, whichever service wrote it) and their depth; a service
// that writes a dead letter only logs and counts it (pkg/dlq.Writer). A
// stuck payout is dead-lettered by the sweeper and so pages from dlq-admin
// alone. A blocked partition pages from dlq-admin's stall detector alone
// (it watches every group's commits through kadm); the payout worker's
// consumer only logs a record it keeps retrying in place.
//
// The webhook URL is a credential (Slack's path is its secret): it is never
// logged. Delivery errors are stripped of the URL net/http puts in them, and
// a malformed ALERT_WEBHOOK_URL is refused without quoting it.
package alert
