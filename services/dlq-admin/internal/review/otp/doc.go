// Package otp finishes a Paystack transfer that waits for a one-time
// password: Paystack (unless OTP is disabled for transfers on the
// integration) sends an OTP to the business for each transfer, and the
// transfer stays in status otp until someone enters it, then is abandoned
// after 30 minutes. Its payout waits in NEEDS_REVIEW (class
// psp_otp_required), which pages; an operator enters the OTP here.
//
// Guarantees:
//   - The OTP is sent only for a transfer Paystack itself says is in status
//     otp, found by our reference (the payout id): what is finalized is the
//     payout's own transfer, never a code the caller names.
//   - Nothing here moves or releases money in the ledger: Paystack's
//     transfer.success (or failed) event, or the worker's lookup when the
//     payout's letter is replayed, settles the payout as for any transfer.
//   - Every attempt is in the audit log, accepted or refused, with who,
//     which transfer and what Paystack said; the OTP itself is never
//     stored or logged.
package otp
