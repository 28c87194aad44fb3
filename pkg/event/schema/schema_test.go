package schema

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/event"
)

// samples builds one event of every type the way the producers do (the
// constructors in package event), filled as the producers fill them.
func samples(t *testing.T) map[event.Type][]byte {
	t.Helper()
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.FixedZone("x", 3600))
	out := map[event.Type][]byte{}
	add := func(typ event.Type, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[typ] = b
	}
	const pid = "0192f0c4-6a2e-7c4b-9b4e-1a2b3c4d5e6f"
	for typ, status := range map[event.Type]string{
		event.TypePayoutSucceeded: "SUCCEEDED", event.TypePayoutFailed: "FINALIZED", event.TypePayoutCanceled: "FINALIZED",
		event.TypePayoutNeedsReview: "NEEDS_REVIEW", event.TypePayoutReversed: "FINALIZED",
	} {
		o := event.NewPayoutOutcome(typ, pid, status, "alice", 1500, "usd", "stripe", at)
		if typ != event.TypePayoutCanceled {
			o.PSPReference = "po_123"
		}
		if typ != event.TypePayoutSucceeded {
			o.Error = "account closed"
		}
		add(typ, o)
	}
	part := event.NewPayoutPartReturn(pid, "alice", 300, 500, "usd", "stripe", at)
	part.PSPReference = "tr_123"
	add(event.TypePayoutPartiallyReversed, part)
	for typ, kind := range map[event.Type]string{
		event.TypeRefundPosted: "refund", event.TypeRefundReversed: "refund_reversal", event.TypeDisputeOpened: "dispute_hold",
		event.TypeDisputeWon: "dispute_release", event.TypeDisputeLost: "dispute_loss",
	} {
		r := event.NewReturnPosted(typ, "paystack", kind, "1234", "bob", 500, "ngn", at)
		r.PaymentReference, r.PSPEventID = "T123", "evt_9"
		if typ == event.TypeRefundPosted {
			r.Owed = 200
		}
		add(typ, r)
	}
	return out
}

func TestEveryProducedEventMatchesItsSchema(t *testing.T) {
	t.Parallel()
	v, err := NewSettlements()
	if err != nil {
		t.Fatal(err)
	}
	got := samples(t)
	if len(got) != len(event.SettlementTypes()) {
		t.Fatalf("samples cover %d types, event.SettlementTypes lists %d", len(got), len(event.SettlementTypes()))
	}
	for _, typ := range event.SettlementTypes() {
		body, ok := got[typ]
		if !ok {
			t.Errorf("no sample of %s", typ)
			continue
		}
		if err := v.Validate(body); err != nil {
			t.Errorf("%s: %v\n%s", typ, err, body)
		}
	}
}

// The schema must be able to refuse: each mutation of a valid event breaks
// one rule.
func TestSchemaRefusesBadEvents(t *testing.T) {
	t.Parallel()
	v, err := NewSettlements()
	if err != nil {
		t.Fatal(err)
	}
	good := samples(t)
	for name, tc := range map[string]struct {
		typ    event.Type
		mutate func(m map[string]any)
	}{
		"missing event id":        {event.TypePayoutSucceeded, func(m map[string]any) { delete(m, "event_id") }},
		"amount as string":        {event.TypePayoutFailed, func(m map[string]any) { m["amount"] = "1500" }},
		"fractional amount":       {event.TypeRefundPosted, func(m map[string]any) { m["amount"] = 15.5 }},
		"upper-case currency":     {event.TypeRefundPosted, func(m map[string]any) { m["currency"] = "USD" }},
		"unknown provider":        {event.TypeDisputeWon, func(m map[string]any) { m["provider"] = "acme" }},
		"wrong schema version":    {event.TypeDisputeLost, func(m map[string]any) { m["schema_version"] = "2" }},
		"bad occurred_at":         {event.TypeDisputeOpened, func(m map[string]any) { m["occurred_at"] = "yesterday" }},
		"payout id not a uuid":    {event.TypePayoutCanceled, func(m map[string]any) { m["payout_id"] = "p1" }},
		"needs review as final":   {event.TypePayoutNeedsReview, func(m map[string]any) { m["status"] = "FINALIZED" }},
		"refund without payment":  {event.TypeRefundReversed, func(m map[string]any) { delete(m, "payment_reference") }},
		"unknown type":            {event.TypePayoutSucceeded, func(m map[string]any) { m["type"] = "payout.maybe" }},
		"succeeded not succeeded": {event.TypePayoutSucceeded, func(m map[string]any) { m["status"] = "FINALIZED" }},
	} {
		var m map[string]any
		if err := json.Unmarshal(good[tc.typ], &m); err != nil {
			t.Fatal(err)
		}
		tc.mutate(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Validate(b); err == nil {
			t.Errorf("%s: accepted %s", name, b)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", name, err)
		}
	}
	if err := v.Validate([]byte(`[1]`)); err == nil {
		t.Error("a JSON array was accepted")
	}
}
