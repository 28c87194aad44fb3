// Package provider names the payment service providers Aegis talks to. The
// word appears in webhook paths, payout requests, destinations, ledger
// accounts and three CHECK constraints; one typed list keeps them the same,
// and a test compares it with the migrated schema.
package provider
