package event

// TypePayoutResolution is an operator's resolution of a NEEDS_REVIEW payout,
// sent by dlq-admin on aegis.transactions (keyed by the payout's user id, so
// it is ordered with that wallet's payout commands) and applied by
// payout-worker.
const TypePayoutResolution Type = "payout.resolution"

// Resolution outcomes: what the operator says the PSP did.
const (
	ResolutionPaid   = "paid"
	ResolutionFailed = "failed"
)

// PayoutResolution asks payout-worker to end a NEEDS_REVIEW payout as the
// operator says, once the PSP's own record does not contradict it. The
// resolution (ResolutionID: dlq-admin's payout_resolutions row, with
// payout-worker's resolution_verdicts row once decided) is the source of
// truth and the unit of idempotency: a replayed command finds it decided
// and changes nothing.
type PayoutResolution struct {
	ResolutionID string `json:"resolution_id"`
	PayoutID     string `json:"payout_id"`
	UserID       string `json:"user_id"`
	// Outcome is ResolutionPaid or ResolutionFailed.
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
	// PSPObjectID is the operator's evidence: the PSP's object (po_…,
	// tr_…, TRF_…) they looked at.
	PSPObjectID string `json:"psp_object_id"`
	Operator    string `json:"operator"`
	ApprovedBy  string `json:"approved_by,omitempty"`
}

// PayoutResolutionID is the message id of resolution id's command:
// payout-resolution:<resolution id>.
func PayoutResolutionID(resolutionID string) string {
	return messageID("payout-resolution", resolutionID)
}
