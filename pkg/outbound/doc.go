// Package outbound is what dlq-admin (which manages outbound endpoints) and
// outbox-relay (which delivers to them) must agree on, written once:
//
//   - Secrets: an endpoint's signing secret is "whsec_" and the base64 of 32
//     random bytes (NewSecret); ParseSecret refuses anything else.
//   - Signatures: deliveries are signed as the Standard Webhooks
//     specification says (Sign): headers webhook-id, webhook-timestamp and
//     webhook-signature "v1,<base64 HMAC-SHA256 of id.timestamp.body>", one
//     space-separated signature per live secret, so a receiver holding the
//     old or the new secret verifies during a rotation's overlap. Any
//     Standard Webhooks library verifies them (the tests use the
//     specification's own Go library).
//   - Event-type filters: an endpoint wants exact types or a prefix
//     wildcard ("payout.*"); CheckTypes accepts only types and prefixes the
//     settlements schema knows, so a typo is refused instead of silently
//     matching nothing. Wants decides, as the SQL of the fan-out does.
//   - URL safety: CheckURL refuses what must never be an endpoint (a URL with
//     credentials or a fragment, plain http, an address that is private,
//     loopback, link-local or a cloud metadata service) unless a
//     development Policy allows it; Policy.Control re-checks the address at
//     connect time, after DNS, so a name that resolves to a public address
//     when it is registered and to 169.254.169.254 later (DNS rebinding) is
//     still refused. Redact keeps an endpoint URL's credentials, path and
//     query (where receivers put tokens) out of logs, errors and alerts.
package outbound
