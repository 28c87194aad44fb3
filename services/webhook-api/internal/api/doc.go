// Package api is webhook-api's HTTP surface (docs/design/contract.md, "HTTP APIs"; openapi.yaml): the PSP webhook
// endpoints and the /v1 payout and wallet endpoints. Handlers parse and
// delegate; status codes are chosen in one place, errors.go.
//
// Webhooks are verified before they are parsed and answered 200 only after
// their transaction commits. Bodies over 1 MiB are refused with 413 without
// being read further. The bodies being read and verified hold at most a
// configured number of bytes together (Reading), each buffer growing only
// as its bytes arrive: beyond it a webhook is answered 503 overloaded with
// Retry-After, so slow or large unverified uploads cannot exhaust memory. Webhooks refused for their signature are counted and
// logged at most once a minute per provider (RefusalLog).
//
// Every /v1 request is authenticated to an API client (package clients) and
// checked against the client's scope before anything is read or written for
// the user it names: outside the scope it is answered 403 and leaves nothing
// behind. Payouts go only to registered destinations (package destinations)
// and within the configured limits. The routes are described in
// ../../openapi.yaml, which a test keeps in step with the router.
package api
