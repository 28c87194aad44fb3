// Command webhook-api verifies PSP webhooks and accepts payout requests,
// committing each to Postgres (inbox or payout, plus the outbox) before it
// answers. Its endpoints: openapi.yaml and docs/design/contract.md; its
// settings: docs/reference/configuration.md.
package main

import "github.com/aegis-payments/aegis/pkg/service"

func main() { service.Main("webhook-api", run) }
