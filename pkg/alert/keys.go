package alert

import (
	"strconv"
	"strings"
)

// Alert keys are built here only. A key names the thing a person must look
// at, never the service that noticed it: the same key from two services is
// one PagerDuty incident (the dedup_key is the key alone), and each kind of
// key has one owner that raises it (see doc.go), so the same letter or the
// same stuck payout never pages twice.

// DeadLetterKey groups the pages for new dead letters of topic with class.
// Owner: dlq-admin, once for each letter it stores (its monitor claims a
// letter's alert in Postgres, so one replica raises it); the service that
// wrote the letter only counts and logs it (pkg/dlq.Writer).
func DeadLetterKey(topic, class string) string { return key("dead_letter", topic, class) }

// DeadLetterPublishFailedKey: a consumer cannot publish a dead letter to
// Kafka, so dlq-admin cannot see it. Owner: the consumer.
func DeadLetterPublishFailedKey(topic string) string { return key("dead_letter_publish_failed", topic) }

// DLQDepthKey: too many open dead letters on topic. Owner: dlq-admin.
func DLQDepthKey(topic string) string { return key("dlq_depth", topic) }

// PartitionStalledKey: a consumer group makes no progress on a partition.
// Raised by dlq-admin's stall detector (no commit progress) only: one
// incident, from one service, for one blocked partition.
func PartitionStalledKey(group, topic string, partition int32) string {
	return key("consumer_stalled", group, topic, strconv.Itoa(int(partition)))
}

// ReceivableKey: a user owes money after a refund or dispute. Owner: the
// payout worker.
func ReceivableKey(userID string) string { return key("receivable", userID) }

// OutboundEndpointDisabledKey: the relay disabled an outbound endpoint
// (it answered 410 Gone, or failed every attempt for
// OUTBOUND_DISABLE_AFTER); its deliveries wait. Owner: outbox-relay, the
// replica whose disable_outbound_endpoint call disabled it (one per
// disabling).
func OutboundEndpointDisabledKey(endpointID string) string {
	return key("outbound-endpoint-disabled", endpointID)
}

func key(parts ...string) string { return strings.Join(parts, ":") }
