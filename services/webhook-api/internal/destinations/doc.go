// Package destinations keeps the places a user's money may be paid to. A
// payout request names a destination registered for its user (by id or by
// its value) and is refused with 422 destination_not_registered otherwise,
// so a leaked or confused API token cannot pay a user's wallet out to an
// account of the caller's choosing without registering it first, visibly
// and on the record (who registered it, when).
//
// This is how the PSPs themselves work: Paystack pays only to transfer
// recipients created beforehand (RCP_…); Stripe pays another person only
// through Connect, by a transfer to their connected account (acct_…) and,
// when the registration names one of its external accounts (ba_…, card_…),
// a payout from that account to it. A bare ba_…/card_… is refused with 422
// destination_not_connected_account: without its connected account it would
// be one of the platform's own, and the money would go to the platform's
// bank (migration 000039 disabled those registered before). Aegis stores the
// PSP's identifier, never bank details: the client creates the recipient or
// connected account at the PSP, where account numbers belong, and registers
// its id here. Registration checks the identifier's shape per provider, then
// asks the PSP that it exists and can be paid (check.go).
//
// Guarantees:
//   - Registration is idempotent while a destination is active: registering
//     the same (user, provider, destination) again answers the same
//     destination. Concurrent registrations resolve to one row through a
//     partial unique index.
//   - Disabling is final for that registration and changes no payout already
//     accepted (the payout row carries its destination id and value); a
//     later registration of the same value is a new destination with a new id.
//   - Resolve runs inside the payout's transaction and locks the row it
//     returns (FOR SHARE), so a destination cannot be disabled between the
//     check and the commit of a payout to it.
package destinations
