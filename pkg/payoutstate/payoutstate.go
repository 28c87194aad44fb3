package payoutstate

import "slices"

// Status is a payout's state, as stored in payouts.status.
type Status string

// Payout states.
const (
	// Initialized: accepted, nothing held or sent yet.
	Initialized Status = "INITIALIZED"
	// Sending: the money is held and the PSP is being called.
	Sending Status = "SENDING_TO_GATEWAY"
	// Sent: the PSP accepted the request.
	Sent Status = "SENT_TO_GATEWAY"
	// Awaiting: the PSP is working on it; its outcome webhook settles it.
	Awaiting Status = "AWAITING_RESPONSE"
	// Succeeded: paid out.
	Succeeded Status = "SUCCEEDED"
	// Retrying: a call failed in a way that may pass; it is sent again.
	Retrying Status = "RETRYING"
	// Failed: it will not be paid; the hold is released (then Finalized).
	Failed Status = "FAILED"
	// NeedsReview: the worker cannot tell what the PSP did; an operator
	// settles it with the PSP's record.
	NeedsReview Status = "NEEDS_REVIEW"
	// Finalized: failed and its hold released, or canceled by the client.
	Finalized Status = "FINALIZED"
)

// All returns every payout state, in the order of the payouts.status CHECK
// constraint.
func All() []Status {
	return []Status{Initialized, Sending, Sent, Awaiting, Succeeded, Retrying, Failed, NeedsReview, Finalized}
}

// Valid reports whether s is a payout state.
func (s Status) Valid() bool { return slices.Contains(All(), s) }

// Final reports whether the payout's outcome is settled here: paid, or
// failed. Only the PSP's later word (a bank return, a payment after the
// hold was released) moves it again.
func (s Status) Final() bool {
	switch s {
	case Succeeded, Failed, Finalized:
		return true
	}
	return false
}

// AtPSP reports whether the PSP holds the payout and its outcome webhook,
// not a command, settles it.
func (s Status) AtPSP() bool { return s == Sent || s == Awaiting }

// IgnoresCommands reports whether payout-worker ignores a payout command
// for a payout in s (a stale or duplicate command): the payout is final or
// at the PSP.
func (s Status) IgnoresCommands() bool { return s.Final() || s.AtPSP() }

// InFlight reports whether the PSP may still be working on the payout.
func (s Status) InFlight() bool {
	switch s {
	case Sending, Sent, Awaiting, Retrying, NeedsReview:
		return true
	}
	return false
}

// Cancelable reports whether a client may still cancel the payout: nobody
// has taken it up for sending.
func (s Status) Cancelable() bool { return s == Initialized }

// Reviewable reports whether the payout waits for an operator's resolution;
// only an operator's replay or resolution moves it on.
func (s Status) Reviewable() bool { return s == NeedsReview }

// Unpaid reports whether the payout ended without paying out, so that it
// counts against no limit.
func (s Status) Unpaid() bool { return s == Failed || s == Finalized }

// Closed reports whether nothing is left for the worker to do and the
// payout's hold is paid out or given back: Succeeded, or Finalized. A
// Failed payout is final but still has its hold's release to post.
func (s Status) Closed() bool { return s == Succeeded || s == Finalized }

// Names returns the states for which has is true, as stored, in All's
// order: the parameter a query takes instead of state literals in its SQL
// (status = ANY(@states::text[])).
func Names(has func(Status) bool) []string {
	var out []string
	for _, s := range All() {
		if has(s) {
			out = append(out, string(s))
		}
	}
	return out
}
