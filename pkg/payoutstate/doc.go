// Package payoutstate names a payout's states, as stored in payouts.status,
// and what each state means to every service that reads or changes a
// payout: whether its outcome is settled here (Final), whether the PSP holds
// it and its outcome webhook settles it (AtPSP), whether the PSP may still
// be working on it (InFlight), whether a client may still cancel it
// (Cancelable), whether it waits for an operator (Reviewable), whether it
// ended without paying out (Unpaid), and whether nothing is left to do,
// its hold paid out or given back (Closed).
//
// It is the one place these words are written: payout-worker's state machine
// moves between them, webhook-api creates, cancels and reconciles payouts by
// them, and the queries of every service receive them as parameters (Names)
// rather than as literals in their SQL, so that a state cannot be renamed or
// reinterpreted in one service alone. Tests tie All to the payouts.status
// CHECK constraint of the migrations, and Cancelable to payout-worker's
// cancel_payout function (the one SQL that spells the states itself: it
// decides under the row lock, and its caller cannot hand it the set).
package payoutstate
