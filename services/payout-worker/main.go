// Command payout-worker consumes verified PSP events and payout commands:
// it credits wallets, runs payouts through the PSPs and records every outcome
// in the double-entry ledger. Run several replicas; they share partitions
// through the consumer group. Its settings: docs/reference/configuration.md.
package main

import "github.com/aegis-payments/aegis/pkg/service"

func main() { service.Main("payout-worker", run) }
