package event_test

import (
	"testing"

	"github.com/aegis-payments/aegis/pkg/event"
)

// The formats are a promise to consumers' dedupe tables: messages already in
// flight carry them, so a change here must be deliberate.
func TestMessageIDs(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{event.PayoutRequestID("p1"), "payout:p1:request"},
		{event.PayoutRetryID("p1", 42), "payout:p1:retry:42"},
		{event.PayoutOutcomeID("p1", "SUCCEEDED"), "payout:p1:SUCCEEDED"},
		{event.ReturnPostedID("stripe", "dispute_hold", "du_1"), "stripe:dispute_hold:du_1"},
		{event.PayoutSweepID("p1", 99), "payout:p1:sweep:99"},
		{event.ReplayID("payout:p1:request", 7, 2), "payout:p1:request:replay:7:2"},
		{event.PSPEvent{Provider: "stripe", EventID: "evt_1"}.MessageID(), "stripe:evt_1"},
	} {
		if tc.got != tc.want {
			t.Errorf("message id %q, want %q", tc.got, tc.want)
		}
	}
}
