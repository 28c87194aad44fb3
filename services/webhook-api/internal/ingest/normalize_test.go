package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/event"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func stripeEventJSON(id, typ, object string) []byte {
	return []byte(`{"id":"` + id + `","object":"event","api_version":"2019-02-19","created":1763726400,"type":"` + typ + `","data":{"object":` + object + `}}`)
}

func TestNormalizeStripe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		body    []byte
		want    event.PSPEvent
		problem string
	}{
		{
			name: "payment intent credits amount_received",
			body: stripeEventJSON("evt_1", "payment_intent.succeeded", `{"id":"pi_1","object":"payment_intent","amount":5000,"amount_received":4500,"currency":"USD","status":"succeeded","metadata":{"user_id":"u1"}}`),
			want: event.PSPEvent{Action: event.ActionCredit, Reference: "pi_1", UserID: "u1", Amount: 4500, Currency: "usd"},
		},
		{
			name: "captured charge credits under its payment intent",
			body: stripeEventJSON("evt_2", "charge.succeeded", `{"id":"ch_1","object":"charge","amount":5000,"amount_captured":5000,"captured":true,"currency":"usd","payment_intent":"pi_1","metadata":{"user_id":"u1"}}`),
			want: event.PSPEvent{Action: event.ActionCredit, Reference: "pi_1", UserID: "u1", Amount: 5000, Currency: "usd"},
		},
		{
			name: "charge with an expanded payment_intent",
			body: stripeEventJSON("evt_2b", "charge.succeeded", `{"id":"ch_9","object":"charge","amount":300,"amount_captured":300,"captured":true,"currency":"eur","payment_intent":{"id":"pi_9","object":"payment_intent"},"metadata":{"user_id":"u2"}}`),
			want: event.PSPEvent{Action: event.ActionCredit, Reference: "pi_9", UserID: "u2", Amount: 300, Currency: "eur"},
		},
		{
			name: "authorised-only charge credits nothing",
			body: stripeEventJSON("evt_3", "charge.succeeded", `{"id":"ch_2","object":"charge","amount":5000,"captured":false,"currency":"usd","metadata":{"user_id":"u1"}}`),
			want: event.PSPEvent{Action: event.ActionNone, Reference: "ch_2", UserID: "u1", Currency: "usd"},
		},
		{
			name:    "payment without user is a problem, not an error",
			body:    stripeEventJSON("evt_4", "payment_intent.succeeded", `{"id":"pi_2","amount":100,"currency":"usd","metadata":{}}`),
			want:    event.PSPEvent{Action: event.ActionCredit, Reference: "pi_2", Amount: 100, Currency: "usd"},
			problem: "metadata.user_id",
		},
		{
			name: "payout paid matched by metadata.payout_id",
			body: stripeEventJSON("evt_5", "payout.paid", `{"id":"po_1","object":"payout","amount":700,"currency":"usd","status":"paid","metadata":{"payout_id":"0193"}}`),
			want: event.PSPEvent{Action: event.ActionPayoutPaid, Reference: "po_1", PayoutID: "0193", Amount: 700, Currency: "usd"},
		},
		{
			name: "payout failed carries the failure code",
			body: stripeEventJSON("evt_6", "payout.failed", `{"id":"po_2","object":"payout","amount":700,"currency":"usd","status":"failed","failure_code":"account_closed","metadata":{"payout_id":"0194"}}`),
			want: event.PSPEvent{Action: event.ActionPayoutFailed, Reference: "po_2", PayoutID: "0194", Amount: 700, Currency: "usd", FailureCode: "account_closed"},
		},
		{
			name: "payout canceled gives the money back as a failure does",
			body: stripeEventJSON("evt_6b", "payout.canceled", `{"id":"po_3","object":"payout","amount":700,"currency":"usd","status":"canceled","metadata":{"payout_id":"0195"}}`),
			want: event.PSPEvent{Action: event.ActionPayoutFailed, Reference: "po_3", PayoutID: "0195", Amount: 700, Currency: "usd"},
		},
		{
			name: "payout updated to paid is evidence of payment",
			body: stripeEventJSON("evt_6c", "payout.updated", `{"id":"po_4","object":"payout","amount":700,"currency":"usd","status":"paid","metadata":{"payout_id":"0196"}}`),
			want: event.PSPEvent{Action: event.ActionPayoutPaid, Reference: "po_4", PayoutID: "0196", Amount: 700, Currency: "usd"},
		},
		{
			name: "payout updated to failed is evidence of failure",
			body: stripeEventJSON("evt_6d", "payout.updated", `{"id":"po_5","object":"payout","amount":700,"currency":"usd","status":"failed","failure_code":"no_account","metadata":{"payout_id":"0197"}}`),
			want: event.PSPEvent{Action: event.ActionPayoutFailed, Reference: "po_5", PayoutID: "0197", Amount: 700, Currency: "usd", FailureCode: "no_account"},
		},
		{
			name: "payout updated while in transit changes nothing",
			body: stripeEventJSON("evt_6e", "payout.updated", `{"id":"po_6","object":"payout","amount":700,"currency":"usd","status":"in_transit","metadata":{}}`),
			want: event.PSPEvent{Action: event.ActionNone, Reference: "po_6", Amount: 700, Currency: "usd"},
		},
		{
			name: "unknown type is kept with no action",
			body: stripeEventJSON("evt_7", "customer.created", `{"id":"cus_1"}`),
			want: event.PSPEvent{Action: event.ActionNone},
		},
	}
	for _, tc := range cases {
		n, err := NormalizeStripe(tc.body, now)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := n.Event
		if got.Provider != Stripe || got.EventID == "" || got.OccurredAt != time.Unix(1763726400, 0).UTC() || string(got.Raw) != string(tc.body) {
			t.Errorf("%s: envelope header wrong: %+v", tc.name, got)
		}
		got.Provider, got.EventID, got.Type, got.OccurredAt, got.Raw, got.ObjectStatus = "", "", "", time.Time{}, nil, ""
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got  %+v\n want %+v", tc.name, got, tc.want)
		}
		if (tc.problem == "") != (n.Problem == "") || !strings.Contains(n.Problem, tc.problem) {
			t.Errorf("%s: problem %q, want containing %q", tc.name, n.Problem, tc.problem)
		}
	}
}

func TestNormalizeStripeMalformed(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"not json":     `{"id":`,
		"no id":        `{"type":"payment_intent.succeeded","data":{"object":{}}}`,
		"no data":      `{"id":"evt_1","type":"payment_intent.succeeded"}`,
		"object array": `{"id":"evt_1","type":"x","data":{"object":[]}}`,
		"bad object":   `{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{"amount":"lots"}}}`,
	} {
		if _, err := NormalizeStripe([]byte(body), now); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: want ErrMalformed, got %v", name, err)
		}
	}
}

// A Stripe event created later than now plus the signature tolerance is
// refused; one a little ahead (clock skew within the tolerance) is not.
func TestNormalizeStripeRefusesEventsFromTheFuture(t *testing.T) {
	t.Parallel()
	body := func(created time.Time) []byte {
		return []byte(strings.Replace(string(stripeEventJSON("evt_f", "payment_intent.succeeded",
			`{"id":"pi_f","amount":1,"currency":"usd","metadata":{"user_id":"u"}}`)), "1763726400", fmt.Sprint(created.Unix()), 1))
	}
	if _, err := NormalizeStripe(body(now.Add(6*time.Minute)), now); !errors.Is(err, ErrFromTheFuture) {
		t.Errorf("6 minutes ahead: want ErrFromTheFuture, got %v", err)
	}
	n, err := NormalizeStripe(body(now.Add(4*time.Minute)), now)
	if err != nil || !n.Event.OccurredAt.Equal(now.Add(4*time.Minute).Truncate(time.Second)) {
		t.Errorf("4 minutes ahead: %v %v", n.Event.OccurredAt, err)
	}
}

// A payout outcome carries what the worker cross-checks it against: amount,
// currency, the PSP's id, the connected account and livemode.
func TestNormalizeStripeCarriesTheEvidence(t *testing.T) {
	t.Parallel()
	obj := `{"id":"po_9","object":"payout","amount":700,"currency":"USD","status":"paid","metadata":{"payout_id":"0193"}}`
	body := strings.Replace(string(stripeEventJSON("evt_9", "payout.paid", obj)), `"object":"event",`,
		`"object":"event","account":"acct_other","livemode":true,`, 1)
	n, err := NormalizeStripe([]byte(body), now)
	if err != nil {
		t.Fatal(err)
	}
	e := n.Event
	if e.Amount != 700 || e.Currency != "usd" || e.Reference != "po_9" || e.PayoutID != "0193" ||
		e.Account != "acct_other" || e.Livemode == nil || !*e.Livemode {
		t.Errorf("evidence not carried: %+v", e)
	}
	n, err = NormalizeStripe(stripeEventJSON("evt_10", "payout.paid", obj), now)
	if err != nil || n.Event.Account != "" || n.Event.Livemode != nil {
		t.Errorf("no account, no livemode: %+v %v", n.Event, err)
	}
}

func TestNormalizePaystack(t *testing.T) {
	t.Parallel()
	charge := `{"event":"charge.success","data":{"id":302961,"reference":"ref_1","amount":150000,"currency":"NGN","status":"success","paid_at":"2026-11-21T10:00:00.000Z","metadata":{"user_id":"u9"}}}`
	n, err := NormalizePaystack([]byte(charge), now)
	if err != nil {
		t.Fatal(err)
	}
	e := n.Event
	if e.EventID != "charge.success:302961" || e.Action != event.ActionCredit || e.UserID != "u9" ||
		e.Amount != 150000 || e.Currency != "ngn" || e.Reference != "ref_1" || n.Problem != "" ||
		!e.OccurredAt.Equal(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("charge.success: %+v %q", e, n.Problem)
	}

	// What Paystack kept is the event's fee; one that cannot be read is
	// none, and the credit goes on.
	for fees, want := range map[string]int64{`2350`: 2350, `0`: 0, `null`: 0, `"x"`: 0, `-5`: 0, `150001`: 0} {
		withFee := strings.Replace(charge, `"status":"success"`, `"status":"success","fees":`+fees, 1)
		n, err := NormalizePaystack([]byte(withFee), now)
		if err != nil || n.Problem != "" || n.Event.Fee != want || n.Event.Amount != 150000 {
			t.Fatalf("fees %s: fee %d, want %d (%q %v)", fees, n.Event.Fee, want, n.Problem, err)
		}
	}

	// Paystack sends metadata as a JSON string on some integrations, numbers as ids.
	stringMeta := `{"event":"charge.success","data":{"id":1,"reference":"r","amount":1,"currency":"NGN","metadata":"{\"user_id\":42}"}}`
	if n, err := NormalizePaystack([]byte(stringMeta), now); err != nil || n.Event.UserID != "42" {
		t.Fatalf("string metadata: %+v %v", n.Event, err)
	}
	noMeta := `{"event":"charge.success","data":{"id":2,"reference":"r2","amount":1,"currency":"NGN","metadata":""}}`
	if n, err := NormalizePaystack([]byte(noMeta), now); err != nil || !strings.Contains(n.Problem, "data.metadata.user_id") {
		t.Fatalf("empty metadata must be a problem: %+v %v", n, err)
	}

	transfer := `{"event":"transfer.failed","data":{"id":77,"reference":"0193-payout","transfer_code":"TRF_1","amount":700,"currency":"NGN","status":"failed"}}`
	n, err = NormalizePaystack([]byte(transfer), now)
	if err != nil || n.Event.Action != event.ActionPayoutFailed || n.Event.PayoutID != "0193-payout" || n.Event.Reference != "TRF_1" {
		t.Fatalf("transfer.failed: %+v %v", n.Event, err)
	}
	reversed := `{"event":"transfer.reversed","data":{"id":77,"reference":"0193-payout"}}`
	if n, _ := NormalizePaystack([]byte(reversed), now); n.Event.EventID == "transfer.failed:77" || n.Event.Action != event.ActionPayoutReversed {
		t.Fatalf("a different event about the same transfer needs its own identity: %+v", n.Event)
	}

	// Without id or reference, the body itself is the identity.
	a, _ := NormalizePaystack([]byte(`{"event":"subscription.create","data":{"plan":1}}`), now)
	b, _ := NormalizePaystack([]byte(`{"event":"subscription.create","data":{"plan":1}}`), now)
	if a.Event.EventID != b.Event.EventID || !strings.HasPrefix(a.Event.EventID, "subscription.create:sha256-") {
		t.Fatalf("body identity: %q %q", a.Event.EventID, b.Event.EventID)
	}
	for name, body := range map[string]string{"not json": `nope`, "no event": `{"data":{}}`, "no data": `{"event":"x"}`, "data string": `{"event":"x","data":"y"}`} {
		if _, err := NormalizePaystack([]byte(body), now); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: want ErrMalformed, got %v", name, err)
		}
	}
}

// FuzzNormalize: any body either normalizes into an envelope that encodes,
// or fails with ErrMalformed (or ErrFromTheFuture, for a Stripe event created
// ahead of the tolerance); never a panic, never another error.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte(stripeEventJSON("evt_1", "payment_intent.succeeded", `{"id":"pi_1","amount":1,"currency":"usd","metadata":{"user_id":"u"}}`)), true)
	f.Add([]byte(`{"event":"charge.success","data":{"id":1,"metadata":"{\"user_id\":1}"}}`), false)
	f.Add([]byte(`{"event":"transfer.success","data":{"reference":"x"}}`), false)
	f.Add([]byte(`{}`), true)
	f.Fuzz(func(t *testing.T, body []byte, isStripe bool) {
		normalize := NormalizePaystack
		if isStripe {
			normalize = NormalizeStripe
		}
		n, err := normalize(body, now)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrFromTheFuture) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if n.Event.EventID == "" || n.Event.Type == "" {
			t.Fatalf("accepted event without identity: %+v", n.Event)
		}
		if _, err := json.Marshal(n.Event); err != nil {
			t.Fatalf("envelope does not encode: %v", err)
		}
	})
}
