// Package api is webhook-api's HTTP surface (CONTRACT.md): the PSP webhook
// endpoints and the /v1 payout and wallet endpoints. Handlers parse and
// delegate; status codes are chosen in one place, errors.go.
//
// Webhooks are verified before they are parsed and answered 200 only after
// their transaction commits. Bodies over 1 MiB are refused with 413 without
// being read further.
package api
