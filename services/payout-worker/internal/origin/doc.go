// Package origin answers one question about every PSP money event before
// the worker lets it move money: is it about our own account's money, in
// the mode of our key? Credits, refunds, disputes and payout outcomes ask
// it through the one function here (Foreign, or ForeignFor for a payout
// paid out on a connected account), so the rule cannot drift between them.
//
// Stripe. Every Stripe Event object carries livemode (true in live mode,
// false in test mode; Stripe's Event object reference documents it as a
// boolean that is always present) and, for an event that happened in a
// connected account (Connect), account: the connected account's id. A
// test-mode event is not evidence about live money, nor the other way
// round, and we take no Connect money events but one kind: a connected
// account's payment is its money, not ours to credit to one of our
// wallets. The exception is the payout we make on a connected account (a
// Stripe payout to a connected account's bank account: our transfer, then
// that account's payout): its payout.* events come from that account, and
// are evidence about that payout only (ForeignFor, with the payout's
// destination). So a Stripe event is foreign when its account is set and
// is not the one the caller expects, or when its livemode is not our key's
// mode (sk_live_/rk_live_: live; anything else, no key included: test).
//
// A Stripe event without livemode. Stripe always sends it, so such an event
// was not written by Stripe as it came (webhook-api keeps livemode exactly
// as the body had it: nil when absent). With a live key it is foreign: only
// livemode true shows that an event is about live money, and real money
// moves only on evidence. With a test key it is accepted: a missing flag
// cannot stand for a live event (those always say true), nothing real
// moves in test mode, and hand-written test events (the README's
// first payment, fixtures) omit it.
//
// Paystack events carry no such flags (a Paystack key is for one mode and
// one integration): Foreign never refuses them.
//
// Foreign is a few comparisons on the decoded envelope, with no I/O and no
// allocation when the event is ours, so it runs on the credit path before
// a credit is queued for its group commit.
package origin
