package ingest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
)

// The outbox envelope spliced by hand says exactly what encoding/json says,
// whitespace in the body aside, for a body as a PSP sends it (indented), an
// envelope using every optional field, and one without a body.
func TestEnvelopeEncodesWhatEncodingJSONWould(t *testing.T) {
	live := true
	body := []byte("{\n  \"id\": \"evt_1\",\n  \"data\": {\"object\": {\"amount\": 2000, \"note\": \"a \\\"quoted\\\" }\"}}\n}\n")
	for name, e := range map[string]event.PSPEvent{
		"credit": {Provider: "stripe", EventID: "evt_1", Type: "payment_intent.succeeded", Action: event.ActionCredit,
			UserID: "user-1", Amount: 2000, Currency: "usd", Reference: "pi_1", OccurredAt: time.Unix(1700000000, 0).UTC(),
			Raw: body},
		"every field": {Provider: "stripe", EventID: "evt_2", Type: "charge.refunded", Action: event.ActionRefund,
			Reference: "pi_2", PayoutID: "po_1", ObjectStatus: "succeeded", FailureCode: "x", Account: "acct_1",
			Livemode: &live, Returns: []event.Return{{ID: "re_1", Amount: 5, Currency: "usd"}}, Stale: true,
			OccurredAt: time.Unix(1700000001, 0).UTC(), Raw: body},
		"no body": {Provider: "paystack", EventID: "evt_3", Type: "charge.success", OccurredAt: time.Unix(1700000002, 0).UTC()},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(e)
			require.NoError(t, err)
			got, err := envelope(e)
			require.NoError(t, err)
			require.True(t, json.Valid(got), "%s", got)
			var compact bytes.Buffer
			require.NoError(t, json.Compact(&compact, got))
			require.Equal(t, string(want), compact.String())
		})
	}
}
