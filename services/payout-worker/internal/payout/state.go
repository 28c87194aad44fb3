package payout

import (
	"fmt"
	"slices"

	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// Status is a payout's state, as stored in payouts.status
// (docs/design/architecture.md, "Payout state machine"); the states and what
// they mean are payoutstate's, shared with every service.
type Status = payoutstate.Status

// Payout states (payoutstate).
const (
	Initialized = payoutstate.Initialized
	Sending     = payoutstate.Sending
	Sent        = payoutstate.Sent
	Awaiting    = payoutstate.Awaiting
	Succeeded   = payoutstate.Succeeded
	Retrying    = payoutstate.Retrying
	Failed      = payoutstate.Failed
	NeedsReview = payoutstate.NeedsReview
	Finalized   = payoutstate.Finalized
)

// statuses is every payout state. Tests walk it to check every pair of
// states against the state machine.
func statuses() []Status { return payoutstate.All() }

// next lists the states allowed after from: the state machine.
func next(from Status) []Status {
	switch from {
	case Initialized:
		return []Status{Sending, Failed}
	case Sending:
		return []Status{Sent, Retrying, Failed, NeedsReview, Succeeded}
	case Sent:
		return []Status{Awaiting, Succeeded, Failed}
	case Awaiting:
		return []Status{Succeeded, Failed, NeedsReview}
	case Retrying:
		// NeedsReview: the sweeper's escalation of a payout whose retry
		// stalled past its deadline twice (deadline.go).
		return []Status{Sending, Succeeded, Failed, NeedsReview}
	case Failed:
		return []Status{Finalized}
	case NeedsReview:
		return []Status{Sending, Succeeded, Failed} // Sending: an operator's replay
	case Succeeded:
		return []Status{Failed} // the bank returned a paid payout
	case Finalized:
		return []Status{NeedsReview} // paid after we had released the hold
	}
	return nil
}

// checkTransition refuses a move the state machine does not allow. The
// refusal is permanent: it is a bug or a record that contradicts the payout,
// and the same record refuses the same way every time, so the consumer
// dead-letters it instead of retrying it in place.
func checkTransition(from, to Status) error {
	if !slices.Contains(next(from), to) {
		return errclass.AsPermanent(fmt.Errorf("payout state machine: %s → %s is not a transition", from, to))
	}
	return nil
}

// inFlight reports whether the PSP may still be working on the payout.
func inFlight(status Status) bool { return status.InFlight() }
