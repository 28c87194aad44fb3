// Package alert is Aegis's record of the moments something went wrong that
// a person must see (docs/design/architecture.md, promise 3: every failure
// ends somewhere a person sees it).
//
// Raise writes a structured log line ("ALERT: <summary>" with alert_key,
// severity, alert_rule, runbook and the details) and counts the alert in
// aegis_alerts_total. It sends nothing: Alertmanager is the one paging path
// (docs/operations/alerts.md, "Paging"). Every kind of key is a condition
// its owner also exports as a gauge of current state (open dead letters by
// topic and class, stalled partitions, users owing, disabled endpoints, open
// PSP disagreements...), and a Prometheus rule on that gauge pages and
// resolves by itself; Rule names the rule for a key, Runbook its page. The
// webhook sink (ALERT_WEBHOOK_URL) is gone: a service started with it set
// refuses to start (ReadConfig).
//
// Alert keys name the thing (the topic and class of dead letters, a
// partition, a user), never the service that noticed it, and are built in
// keys.go only. Each kind has one owner: dlq-admin raises for dead letters
// (once per letter it stores, whichever service wrote it) and their depth; a
// service that writes a dead letter only logs and counts it
// (pkg/dlq.Writer). A blocked partition is raised by dlq-admin's stall
// detector alone.
package alert
