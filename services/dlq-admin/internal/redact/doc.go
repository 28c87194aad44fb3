// Package redact hides secrets and card or bank data in JSON before dlq-admin
// shows it to an operator. Dead letters keep their original payload and
// headers (a replay must publish them unchanged); only what leaves the
// service through the API is redacted.
//
// Redaction is by key, never by value: the value of every object key whose
// name is sensitive (account_number, card, cvc, iban, token, secret,
// authorization, signature, ...; case, dashes and camelCase ignored, and
// also as part of a longer name such as client_secret or
// x-paystack-signature) is replaced, whole, by "[REDACTED]". Inside card
// objects (Stripe's {"object": "card"}, or the elements under a "cards" key)
// number, exp_month and exp_year are sensitive too. A "raw" field holding a
// PSP payload as a JSON string is parsed and redacted like the rest.
//
// Over-redacting is the safe failure: card_type or signature_verified are
// hidden along with the data they sit next to. Object key order and numbers
// are kept as they were, so a redacted payload reads like the original.
package redact
