// Package verify authenticates PSP webhooks before a single byte of them is
// parsed.
//
// Stripe signs "<t>.<body>" with HMAC-SHA256 and sends t=…,v1=… (several v1
// values while Stripe rolls a secret); we accept a signature made with any of
// our configured secrets (our own rotation) and reject timestamps older than
// five minutes, or more than five minutes in the future (stripe-go checks
// only the past; ingest refuses an event whose own created time is in the
// future the same way). Verification is stripe-go's own ValidatePayloadWithTolerance;
// we deliberately do not use ConstructEvent, which refuses events whose
// api_version differs from the library's pinned one — a real, correctly
// signed event must never be turned away because of the account's API version.
//
// Paystack signs the raw body with HMAC-SHA512 under the secret key and sends
// no timestamp, so a captured Paystack webhook could be replayed at any time:
// its replay protection is the durable dedupe on (provider, event_id) in
// webhook_events. A replay is acknowledged and changes nothing.
package verify
