// Package payouts is the review area's read model of payouts: one payout
// with its transitions and PSP attempts (what the console shows of the
// payout a dead letter or a review is about) and the payouts list, those in
// NEEDS_REVIEW first, each with its latest dead letter and resolution.
//
// It only reads: the payouts and their history belong to payout-worker,
// and dlq-admin never changes them (an operator's resolution is a command
// the worker applies, package resolution). The list pages by keyset on
// (review first, created_at, id), so payouts that change state while an
// operator pages never repeat a row on a later page; the cursor is opaque.
// Every statement is in queries.sql.
package payouts
