// Command outbox-relay publishes committed transaction_outbox rows to Kafka.
// Run as many replicas as you like; they share the outbox through SKIP
// LOCKED claims. Its settings: docs/reference/configuration.md.
package main

import "github.com/aegis-payments/aegis/pkg/service"

func main() { service.Main("outbox-relay", run) }
