// Package erasure erases one user's personal data on request (a GDPR-style
// erasure): `aegisctl users erase`, POST /v1/erasures.
//
// It guarantees:
//
//   - four eyes, always: an erasure cannot be undone, so every request
//     waits for a second, different person (package approval's gate, kind
//     user_erasure) whatever REQUIRE_SECOND_APPROVER says, and runs in the
//     transaction that records the approval and its audit_log row;
//   - money is never stranded: the schema owner's erase_user_data refuses,
//     changing nothing, while a wallet of the user holds or is owed money,
//     a payout of theirs is not closed, an outbox row of theirs is
//     unpublished or a dead letter of theirs is open; it checks at the
//     request (so nobody approves what cannot run) and again at the
//     approval, under the wallets' row locks;
//   - the user id is replaced everywhere by a pseudonym, "erased:" and 32
//     hex digits of HMAC-SHA256(ERASURE_KEY, user id): stable for a person,
//     so a later PSP event about them is recognised (Pseudonym, the
//     erasures table), and linkable to them only with the key. The ledger
//     keeps its amounts and ids: wallets keep their ids, so balances and
//     sums do not change;
//   - nothing this package writes or logs holds the user id or the person's
//     data: the erasures row holds the user id only while the request waits
//     (cleared at the decision), the approval and the audit rows name the
//     pseudonym, and a reason that quotes the user id is refused.
//
// What erase_user_data changes per column is in docs/data.md ("Personal
// data"); how to run it and what it cannot undo in
// docs/operations/erasure.md.
package erasure
