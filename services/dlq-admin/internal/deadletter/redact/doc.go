// Package redact hides secrets, card data and personal data in JSON before
// dlq-admin shows it. Dead letters keep their original payload and headers
// (a replay must publish them unchanged); only what leaves the service
// through the API is redacted, at the reader's level:
//
//   - Secrets (operators): credentials and card data — card, cvc, token,
//     secret, password, api key, authorization, signature. Nobody needs them
//     to fix a message, and card numbers must never be displayed. Operators
//     otherwise see the payload as stored: they replay it and must be able
//     to tell a wrong account number from a right one.
//   - Personal (viewers): also names, email, phone, addresses, bank account
//     and routing numbers, IBANs, BVN and other identity numbers, birth
//     dates. A viewer watches the queue; it needs the shape of a failure,
//     not whose money it was.
//
// Redaction is by key, never by value: the value of every object key whose
// name is hidden at the level (case, dashes and camelCase ignored, and also
// as part of a longer name such as client_secret, x-paystack-signature,
// first_name or receipt_email) is replaced, whole, by "[REDACTED]". Inside card
// objects (Stripe's {"object": "card"}, or the elements under a "cards" key)
// number, exp_month and exp_year are sensitive too. A "raw" field holding a
// PSP payload as a JSON string is parsed and redacted like the rest.
//
// Over-redacting is the safe failure: card_type or signature_verified are
// hidden along with the data they sit next to, and a viewer loses every
// "name" key, a product's as well as a person's. Object key order and numbers
// are kept as they were, so a redacted payload reads like the original.
package redact
