// Package kafkax names Aegis's Kafka topics and headers and builds franz-go
// clients the same way in every service.
//
// Records are keyed by the wallet owner's user id, so all of one wallet's
// events land in one partition and are consumed in order. Headers carry
// correlation_id and event_type (docs/design/contract.md, "Kafka") plus message_id, the stable
// business identity consumers deduplicate on.
package kafkax
