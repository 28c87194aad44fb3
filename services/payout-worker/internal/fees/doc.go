// Package fees puts Stripe's fees in the ledger. Stripe's payment events do
// not say what Stripe kept of a payment; its balance transactions do (fee,
// on the charge's balance transaction). The collector reads them from
// Stripe's own record every round and posts each fee once: psp_fee,
// reference stripe:<balance transaction id>, clearing +fee and the fees
// account -fee (docs/reference/accounting.md), so the clearing account
// tracks what Stripe holds for us. Paystack's fee comes in its
// charge.success event and is posted with the credit (package ledger).
//
// Guarantees:
//   - Only payments to Aegis's wallets count: a charge whose metadata names
//     a user_id, the field every credit is made from; the platform's other
//     Stripe business is not ours to book.
//   - Each fee posts once, whatever rounds overlap or replicas run
//     (ledger_transactions' (kind, reference) key), and independently of
//     its payment's credit: the fee was Stripe's either way, so the order
//     in which the two arrive does not matter.
//   - Nothing is skipped: a round reads from its cursor (minus an overlap)
//     to now minus a grace, and moves the cursor only when every balance
//     transaction of the window was read and its fee posted; a failed round
//     is read again by the next. One replica rounds at a time (an advisory
//     lock); a replica that does not get it skips the round.
package fees
