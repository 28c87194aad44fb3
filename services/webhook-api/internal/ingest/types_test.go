package ingest

import (
	"fmt"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/event"
)

// event.StripeTypes and event.PaystackTypes are the webhook types the
// normaliser acts on: each listed type, with an object that says money moved,
// gets an action; a type outside the lists is stored with ActionNone. (There
// is no SQL CHECK on event_type: webhook_events also keeps types Aegis does
// not act on.)
func TestTypeListsAreWhatTheNormaliserActsOn(t *testing.T) {
	t.Parallel()
	stripe := func(typ event.Type) []byte {
		return fmt.Appendf(nil, `{"id":"evt_1","type":%q,"created":1,"data":{"object":{"id":"obj_1","amount":100,
			"amount_received":100,"amount_captured":100,"amount_reversed":100,"captured":true,"currency":"usd","status":"paid",
			"payment_intent":"pi_1","charge":"ch_1","metadata":{"user_id":"alice","payout_id":"0192f0c4-6a2e-7c4b-9b4e-1a2b3c4d5e6f"},
			"refunds":{"data":[{"id":"re_1","amount":100,"currency":"usd","status":"succeeded"}]}}}}`, typ)
	}
	paystack := func(typ event.Type) []byte {
		return fmt.Appendf(nil, `{"event":%q,"data":{"id":1,"reference":"ref_1","amount":100,"currency":"NGN","status":"success",
			"transfer_code":"TRF_1","metadata":{"user_id":"alice"},"transaction_reference":"T1","refund_reference":"rf_1",
			"refund_amount":100,"resolution":"declined","transaction":{"reference":"T1","amount":100,"currency":"NGN"}}}`, typ)
	}
	for _, tc := range []struct {
		name      string
		types     []event.Type
		body      func(event.Type) []byte
		normalize func([]byte, time.Time) (Normalized, error)
	}{
		{"stripe", event.StripeTypes(), stripe, NormalizeStripe},
		{"paystack", event.PaystackTypes(), paystack, NormalizePaystack},
	} {
		for _, typ := range append(tc.types, "customer.created", event.StripeTransferCreated) {
			n, err := tc.normalize(tc.body(typ), now)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.name, typ, err)
			}
			listed := false
			for _, l := range tc.types {
				listed = listed || l == typ
			}
			if acts := n.Event.Action != event.ActionNone; acts != listed {
				t.Errorf("%s %s: action %q, listed in the type list: %v", tc.name, typ, n.Event.Action, listed)
			}
			if n.Event.Type != string(typ) {
				t.Errorf("%s %s: normalised type %q", tc.name, typ, n.Event.Type)
			}
		}
	}
}
