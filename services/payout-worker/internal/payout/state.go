package payout

import (
	"fmt"
	"slices"

	"github.com/aegis-payments/aegis/pkg/errclass"
)

// Payout states (ARCHITECTURE.md).
const (
	Initialized = "INITIALIZED"
	Sending     = "SENDING_TO_GATEWAY"
	Sent        = "SENT_TO_GATEWAY"
	Awaiting    = "AWAITING_RESPONSE"
	Succeeded   = "SUCCEEDED"
	Retrying    = "RETRYING"
	Failed      = "FAILED"
	NeedsReview = "NEEDS_REVIEW"
	Finalized   = "FINALIZED"
)

// next lists the states allowed after from: the state machine.
func next(from string) []string {
	switch from {
	case Initialized:
		return []string{Sending, Failed}
	case Sending:
		return []string{Sent, Retrying, Failed, NeedsReview, Succeeded}
	case Sent:
		return []string{Awaiting, Succeeded, Failed}
	case Awaiting:
		return []string{Succeeded, Failed, NeedsReview}
	case Retrying:
		return []string{Sending, Succeeded, Failed}
	case Failed:
		return []string{Finalized}
	case NeedsReview:
		return []string{Sending, Succeeded, Failed} // Sending: an operator's replay
	case Succeeded:
		return []string{Failed} // the bank returned a paid payout
	case Finalized:
		return []string{NeedsReview} // paid after we had released the hold
	}
	return nil
}

// checkTransition refuses a move the state machine does not allow. The
// refusal is permanent: it is a bug or a record that contradicts the payout,
// and the same record refuses the same way every time, so the consumer
// dead-letters it instead of retrying it in place.
func checkTransition(from, to string) error {
	if !slices.Contains(next(from), to) {
		return errclass.AsPermanent(fmt.Errorf("payout state machine: %s → %s is not a transition", from, to))
	}
	return nil
}

// inFlight reports whether the PSP may still be working on the payout.
func inFlight(status string) bool {
	switch status {
	case Sending, Sent, Awaiting, Retrying, NeedsReview:
		return true
	}
	return false
}
