package pspsync

import (
	"encoding/json"
	"testing"
)

// Paystack renders a transfer's recipient as the recipient object in its
// list and fetch answers and as a numeric id when a transfer is initiated;
// the stand-in renders the code itself. The code is what a payout sends.
func TestPaystackTransferRecipientCode(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`{"transfer_code":"TRF_1","recipient":{"recipient_code":"RCP_a","type":"nuban"}}`: "RCP_a",
		`{"transfer_code":"TRF_1","recipient":"RCP_b"}`:                                   "RCP_b",
		`{"transfer_code":"TRF_1","recipient":123}`:                                       "",
		`{"transfer_code":"TRF_1"}`:                                                       "",
	} {
		var tr paystackTransfer
		if err := json.Unmarshal([]byte(raw), &tr); err != nil {
			t.Fatal(err)
		}
		if got := tr.object().Destination; got != want {
			t.Errorf("%s: destination %q, want %q", raw, got, want)
		}
	}
}

// Each transfer status Paystack documents has the verdict its table gives
// it: only success paid; the conclusive failures (failed, reversed,
// abandoned, blocked, rejected) failed, so that a payout failed here is not
// flagged as pending at the PSP; the rest pending.
func TestPaystackTransferVerdictFollowsPaystacksStatusTable(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]string{
		"success": PSPPaid,
		"failed":  PSPFailed, "reversed": PSPFailed, "abandoned": PSPFailed, "blocked": PSPFailed, "rejected": PSPFailed,
		"pending": PSPPending, "received": PSPPending, "otp": PSPPending, "something_new": PSPPending,
	} {
		if got := (paystackTransfer{TransferCode: "TRF_1", Status: status}).object().Verdict; got != want {
			t.Errorf("status %q: verdict %q, want %q", status, got, want)
		}
	}
}
