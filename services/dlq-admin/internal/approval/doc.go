// Package approval is the four-eyes gate (REQUIRE_SECOND_APPROVER): an
// action an owner holds waits, as an approvals row, until a second,
// different person approves or anyone rejects it.
//
// The gate knows nothing of what it holds. An owner (a NEEDS_REVIEW
// resolution, a large bulk replay, ...) decides whether an action must
// wait, holds it (Hold, in the owner's own transaction, so the request
// and what the owner records with it commit together) and registers, at
// wiring time, the Owner that applies or closes the requests of its kind.
// The gate guarantees the rest for every kind alike:
//
//   - a request is decided once: the decision locks its row, and the owner
//     applies it in the transaction that records the decision and its
//     audit_log row, so an approval and its effect commit together or not
//     at all;
//   - the requester may not approve their own request, through this token
//     or another token of theirs, under any spelling of their name (package
//     person says who holds a token; the table refuses it too: each
//     approval records the requester's and the approver's person);
//   - a rejection needs a reason.
package approval
