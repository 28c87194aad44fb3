package event

import (
	"strconv"
	"strings"
)

// Message ids are the message_id header consumers deduplicate on
// (processed_messages): the same logical message must get the same id from
// every producer, every time, and two different messages never one id. They
// are built here only; a changed format re-delivers every message in flight.

// PayoutRequestID is the client's payout request command:
// payout:<payout id>:request.
func PayoutRequestID(payoutID string) string { return messageID("payout", payoutID, "request") }

// PayoutRetryID is the scheduled retry command written with transition
// transitionID: payout:<payout id>:retry:<transition id>.
func PayoutRetryID(payoutID string, transitionID int64) string {
	return messageID("payout", payoutID, "retry", strconv.FormatInt(transitionID, 10))
}

// PayoutOutcomeID is the payout's outcome event in status:
// payout:<payout id>:<status>.
func PayoutOutcomeID(payoutID, status string) string { return messageID("payout", payoutID, status) }

// PayoutPartReturnID is the aegis.settlements event of a partial reversal
// of payout payoutID that brought what the PSP took back to reversed in
// all: payout:<id>:reversed:<reversed>, one per part.
func PayoutPartReturnID(payoutID string, reversed int64) string {
	return messageID("payout", payoutID, "reversed", strconv.FormatInt(reversed, 10))
}

// ReturnPostedID is the aegis.settlements event of ledger posting
// postingKind (refund, refund_reversal, dispute_hold, dispute_release,
// dispute_loss) of the provider's refund or dispute objectID:
// <provider>:<posting kind>:<object id>. Each posting happens once per
// object, so the id names one transition.
func ReturnPostedID(provider, postingKind, objectID string) string {
	return messageID(provider, postingKind, objectID)
}

// PayoutSweepID is the dead letter the stuck-payout sweep writes for the
// payout at sweep time n (Unix nanoseconds): payout:<payout id>:sweep:<n>.
func PayoutSweepID(payoutID string, n int64) string {
	return messageID("payout", payoutID, "sweep", strconv.FormatInt(n, 10))
}

// BusyDeferID is the copy of message orig that the payout worker deferred
// at time n (Unix nanoseconds) because its wallet was busy:
// <orig>:busy:<n>.
func BusyDeferID(orig string, n int64) string {
	return messageID(orig, "busy", strconv.FormatInt(n, 10))
}

// IsReplayID reports whether message id id is an operator's replay of a
// dead letter (ReplayID), or a copy of one (BusyDeferID keeps its origin).
func IsReplayID(id string) bool { return strings.Contains(id, ":replay:") }

// ReplayID is the count-th replay of dead letter letterID whose original
// message id was orig: <orig>:replay:<letter id>:<count>.
func ReplayID(orig string, letterID int64, count int) string {
	return messageID(orig, "replay", strconv.FormatInt(letterID, 10), strconv.Itoa(count))
}

// CreditWaitID is the attempt-th delayed copy of refund or dispute message
// orig, published again to wait for its payment's credit:
// <orig>#credit-wait-<attempt>.
func CreditWaitID(orig string, attempt int) string {
	return orig + "#credit-wait-" + strconv.Itoa(attempt)
}

// MessageID is the PSP event's id: <provider>:<event id>.
func (e PSPEvent) MessageID() string { return messageID(e.Provider, e.EventID) }

func messageID(parts ...string) string { return strings.Join(parts, ":") }
