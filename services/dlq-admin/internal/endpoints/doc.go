// Package endpoints is dlq-admin's management of outbound endpoints
// (docs/design/outbound.md, "Management API"): the endpoints themselves,
// their secrets, and the delivery log the relay keeps for them.
//
// What it guarantees, and why:
//
//   - outbound_endpoints is dlq-admin's table and is written here only.
//     The relay's tables (messages, deliveries, attempts, health) are read
//     through their *_for_ops views and written only through the relay's
//     functions (resend_outbound_delivery, resend_outbound_message,
//     recover_outbound_endpoint; migration 000041), so the relay's
//     invariants (state and finished_at, one delivery per message and
//     endpoint) hold whatever an operator does.
//   - Every change is one transaction with its audit_log row (actor,
//     reason): the log never shows a change that did not happen nor misses
//     one that did. The audit detail names an endpoint's URL only as
//     outbound.Redact shows it (receivers put tokens in paths and queries)
//     and never holds a secret.
//   - A URL is checked by outbound.Policy.CheckURL when it is registered or
//     changed (the relay checks the address again when it connects); event
//     types by outbound.CheckTypes; a secret is whsec_ (outbound.NewSecret
//     or outbound.ParseSecret); a legacy secret is 16 characters or more.
//     A refused value is an *input.Invalid naming the field, before
//     anything is written.
//   - Secrets leave this package only from Create, RotateSecret and Secret;
//     Endpoint, the shape every read returns, has no secret field.
//   - Rotation keeps the current secret signing until the overlap
//     (OUTBOUND_ROTATION_OVERLAP) ends; rotating again within it drops the
//     oldest, so at most two secrets sign.
package endpoints
