package alert

import (
	"strconv"
	"strings"
)

// Alert keys are built here only. A key names the thing a person must look
// at, never the service that noticed it, and each kind of key has one owner
// that raises it (see doc.go). The kind (the part before the first colon)
// names the Prometheus rule that pages for the condition (Rule): the page
// comes from that rule, on a gauge of the condition's current state the
// owner exports, so it resolves by itself; Raise's log line is the record
// of the moment it was noticed.

// Kinds of keys.
const (
	KindDeadLetter              = "dead_letter"
	KindDeadLetterPublishFailed = "dead_letter_publish_failed"
	KindDLQDepth                = "dlq_depth"
	KindConsumerStalled         = "consumer_stalled"
	KindReceivable              = "receivable"
	KindOutboundEndpoint        = "outbound-endpoint-disabled"
	// Keys without a subject: the kind is the whole key.
	ReconciliationKey           = "reconciliation"
	PSPReconciliationKey        = "psp_reconciliation"
	PSPReconciliationFailedKey  = "psp_reconciliation_failed"
	PSPReconciliationClearedKey = "psp_reconciliation_cleared"
)

// UnprovenEventClass is pkg/eventproof's dead-letter class (a money event
// nobody proved webhook-api verified), which pages as critical.
const UnprovenEventClass = "unproven_event"

// Kinds lists every kind of key, for the test that each has a rule and a
// runbook.
func Kinds() []string {
	return []string{KindDeadLetter, KindDeadLetterPublishFailed, KindDLQDepth, KindConsumerStalled, KindReceivable,
		KindOutboundEndpoint, ReconciliationKey, PSPReconciliationKey, PSPReconciliationFailedKey, PSPReconciliationClearedKey}
}

// Rule is the name of the Prometheus alerting rule
// (services/dlq-admin/alerts/prometheus-rules.yml) that pages for the
// condition key names, "" for a key of no known kind.
func Rule(key string) string {
	kind, _, _ := strings.Cut(key, ":")
	switch kind {
	case KindDeadLetter:
		if strings.HasSuffix(key, ":"+UnprovenEventClass) {
			// A money event nobody proved webhook-api verified: critical.
			return "AegisDeadLetterUnprovenEvent" // aegis_dlq_open_letters{class="unproven_event"}
		}
		return "AegisDeadLetterOpen" // aegis_dlq_open_letters{topic, class}
	case KindDeadLetterPublishFailed:
		return "AegisDeadLetterPublishFailing" // aegis_consumer_dead_letter_publish_failing{topic}
	case KindDLQDepth:
		return "AegisDeadLetterDepthHigh" // aegis_dlq_depth{status="open"}
	case KindConsumerStalled:
		return "AegisConsumerStalled" // aegis_consumer_group_stalled
	case KindReceivable:
		return "AegisReceivableOpen" // aegis_receivables_open{currency}
	case KindOutboundEndpoint:
		return "AegisOutboundEndpointDisabled" // aegis_outbound_endpoints_disabled{reason}
	case ReconciliationKey:
		return "AegisReconciliationDiscrepancy" // aegis_reconciliation_discrepancies
	case PSPReconciliationKey, PSPReconciliationClearedKey:
		// A cleared disagreement is the resolution of the same page.
		return "AegisPSPDisagreementOpen" // aegis_psp_disagreements_open{provider, kind}
	case PSPReconciliationFailedKey:
		return "AegisPSPReconciliationFailing" // aegis_psp_reconciliation_runs_total{status="failed"}
	}
	return ""
}

// KindOf is key's kind, the part before its first colon, or "other" for a
// key of no known kind: the label values stay a fixed set.
func KindOf(key string) string {
	kind, _, _ := strings.Cut(key, ":")
	for _, k := range Kinds() {
		if kind == k {
			return kind
		}
	}
	return "other"
}

// RunbookFallback is the runbook an alert of no known kind points to.
const RunbookFallback = "docs/operations/alerts.md"

// Runbook is the path, in the repository, of rule's runbook page.
func Runbook(rule string) string { return "docs/runbooks/" + rule + ".md" }

// DeadLetterKey names new dead letters of topic with class. Owner:
// dlq-admin, once for each letter it stores (its monitor claims a letter's
// alert in Postgres, so one replica raises it); the service that wrote the
// letter only counts and logs it (pkg/dlq.Writer).
func DeadLetterKey(topic, class string) string { return key(KindDeadLetter, topic, class) }

// DeadLetterPublishFailedKey: a consumer cannot publish a dead letter to
// Kafka, so dlq-admin cannot see it. Owner: the consumer.
func DeadLetterPublishFailedKey(topic string) string { return key(KindDeadLetterPublishFailed, topic) }

// DLQDepthKey: too many open dead letters on topic. Owner: dlq-admin.
func DLQDepthKey(topic string) string { return key(KindDLQDepth, topic) }

// PartitionStalledKey: a consumer group makes no progress on a partition.
// Raised by dlq-admin's stall detector (no commit progress) only.
func PartitionStalledKey(group, topic string, partition int32) string {
	return key(KindConsumerStalled, group, topic, strconv.Itoa(int(partition)))
}

// ReceivableKey: a user owes money after a refund or dispute. Owner: the
// payout worker.
func ReceivableKey(userID string) string { return key(KindReceivable, userID) }

// OutboundEndpointDisabledKey: the relay disabled an outbound endpoint
// (it answered 410 Gone, or failed every attempt for
// OUTBOUND_DISABLE_AFTER); its deliveries wait. Owner: outbox-relay, the
// replica whose disable_outbound_endpoint call disabled it (one per
// disabling).
func OutboundEndpointDisabledKey(endpointID string) string {
	return key(KindOutboundEndpoint, endpointID)
}

func key(parts ...string) string { return strings.Join(parts, ":") }
