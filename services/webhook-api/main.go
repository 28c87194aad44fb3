// Command webhook-api verifies PSP webhooks and accepts payout requests,
// committing each to Postgres (inbox or payout, plus the outbox) before it
// answers. See CONTRACT.md for its endpoints and settings.
package main

import "github.com/aegis-payments/aegis/pkg/service"

func main() { service.Main("webhook-api", run) }
