// Package stall watches every Aegis consumer group from the outside, as
// Kafka sees it, and raises an alert when a partition has lag and its
// committed offset has not moved for a configurable time (STALL_AFTER),
// naming the group, the partition and the member that holds it.
//
// Why from the outside: a consumer that is stuck cannot be trusted to say
// so. A partition can stop silently in two ways: a poison record
// retried in place for ever (the worker looks busy and healthy), and a
// ghost member the broker keeps in the group after its process died (no
// process is left to report anything). Both show the same way here: lag
// above zero and a commit that does not move. The check needs only the
// group coordinator's answers (DescribeGroups, OffsetFetch, ListOffsets
// through kadm.Lag), so it also covers a group with no member at all.
//
// It exports, per group, topic and partition, the lag, the time the commit
// last moved and whether the partition is stalled, so Prometheus can alert
// on the same signal (alerts/prometheus-rules.yml, AegisConsumerStalled).
// Progress is remembered in memory: after a restart of dlq-admin a stall is
// detected STALL_AFTER later than it began, never falsely.
package stall
