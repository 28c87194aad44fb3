package ingest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
)

func TestNormalizeRefundsAndDisputes(t *testing.T) {
	t.Parallel()
	paystack := func(name, data string) []byte { return []byte(`{"event":"` + name + `","data":` + data + `}`) }
	cases := []struct {
		name      string
		stripe    bool
		body      []byte
		action    event.Action
		reference string
		returns   []event.Return
		problem   string
	}{
		{
			name: "stripe refund.created (partial) names its payment intent", stripe: true,
			body:   stripeEventJSON("evt_r1", "refund.created", `{"id":"re_1","object":"refund","amount":300,"currency":"USD","status":"succeeded","charge":"ch_1","payment_intent":"pi_1"}`),
			action: event.ActionRefund, reference: "pi_1",
			returns: []event.Return{{ID: "re_1", Amount: 300, Currency: "usd", Outcome: event.OutcomeRefunded}},
		},
		{
			name: "stripe refund.updated to canceled voids it; a charge without intent is the payment", stripe: true,
			body:   stripeEventJSON("evt_r2", "refund.updated", `{"id":"re_2","object":"refund","amount":300,"currency":"usd","status":"canceled","charge":"ch_7","payment_intent":null}`),
			action: event.ActionRefund, reference: "ch_7",
			returns: []event.Return{{ID: "re_2", Amount: 300, Currency: "usd", Outcome: event.OutcomeRefundVoid}},
		},
		{
			name: "stripe charge.refunded with its refunds listed", stripe: true,
			body:   stripeEventJSON("evt_r3", "charge.refunded", `{"id":"ch_1","object":"charge","amount":1000,"amount_refunded":1000,"currency":"usd","payment_intent":"pi_1","refunds":{"data":[{"id":"re_1","amount":300,"currency":"usd","status":"succeeded"},{"id":"re_3","amount":700,"currency":"usd","status":"pending"}]}}`),
			action: event.ActionRefund, reference: "pi_1",
			returns: []event.Return{{ID: "re_1", Amount: 300, Currency: "usd", Outcome: event.OutcomeRefunded},
				{ID: "re_3", Amount: 700, Currency: "usd", Outcome: event.OutcomeRefunded}},
		},
		{
			name: "stripe charge.refunded without the list is for the record (refund.* carry the money)", stripe: true,
			body:   stripeEventJSON("evt_r4", "charge.refunded", `{"id":"ch_1","object":"charge","amount":1000,"amount_refunded":1000,"currency":"usd","payment_intent":"pi_1"}`),
			action: event.ActionNone, reference: "pi_1",
		},
		{
			name: "stripe dispute created", stripe: true,
			body:   stripeEventJSON("evt_d1", "charge.dispute.created", `{"id":"dp_1","object":"dispute","amount":600,"currency":"usd","status":"needs_response","charge":"ch_1","payment_intent":"pi_1"}`),
			action: event.ActionDispute, reference: "pi_1",
			returns: []event.Return{{ID: "dp_1", Amount: 600, Currency: "usd", Outcome: event.OutcomeDisputeOpen}},
		},
		{
			name: "stripe dispute closed lost", stripe: true,
			body:   stripeEventJSON("evt_d2", "charge.dispute.closed", `{"id":"dp_1","object":"dispute","amount":600,"currency":"usd","status":"lost","charge":{"id":"ch_1"},"payment_intent":"pi_1"}`),
			action: event.ActionDispute, reference: "pi_1",
			returns: []event.Return{{ID: "dp_1", Amount: 600, Currency: "usd", Outcome: event.OutcomeDisputeLost}},
		},
		{
			name: "stripe dispute closed won", stripe: true,
			body:   stripeEventJSON("evt_d3", "charge.dispute.closed", `{"id":"dp_2","object":"dispute","amount":600,"currency":"usd","status":"won","charge":"ch_9"}`),
			action: event.ActionDispute, reference: "ch_9",
			returns: []event.Return{{ID: "dp_2", Amount: 600, Currency: "usd", Outcome: event.OutcomeDisputeWon}},
		},
		{
			name: "stripe refund without a payment is a problem", stripe: true,
			body:   stripeEventJSON("evt_r5", "refund.created", `{"id":"re_5","object":"refund","amount":300,"currency":"usd","status":"succeeded"}`),
			action: event.ActionRefund, problem: "names no payment",
			returns: []event.Return{{ID: "re_5", Amount: 300, Currency: "usd", Outcome: event.OutcomeRefunded}},
		},
		{
			name:   "paystack refund.processed with a string amount",
			body:   paystack("refund.processed", `{"id":81,"transaction_reference":"T1","refund_reference":"RF1","amount":"2500","currency":"NGN","status":"processed"}`),
			action: event.ActionRefund, reference: "T1",
			returns: []event.Return{{ID: "RF1", Amount: 2500, Currency: "ngn", Outcome: event.OutcomeRefunded}},
		},
		{
			name:   "paystack charge.dispute.create",
			body:   paystack("charge.dispute.create", `{"id":7,"refund_amount":4000,"currency":"NGN","status":"awaiting-merchant-feedback","transaction":{"reference":"T1","amount":5000,"currency":"NGN"}}`),
			action: event.ActionDispute, reference: "T1",
			returns: []event.Return{{ID: "7", Amount: 4000, Currency: "ngn", Outcome: event.OutcomeDisputeOpen}},
		},
		{
			name:   "paystack charge.dispute.resolve merchant-accepted is lost",
			body:   paystack("charge.dispute.resolve", `{"id":7,"refund_amount":4000,"currency":"NGN","status":"resolved","resolution":"merchant-accepted","transaction":{"reference":"T1","amount":5000}}`),
			action: event.ActionDispute, reference: "T1",
			returns: []event.Return{{ID: "7", Amount: 4000, Currency: "ngn", Outcome: event.OutcomeDisputeLost}},
		},
		{
			name:   "paystack charge.dispute.resolve declined is won; amount defaults to the transaction's",
			body:   paystack("charge.dispute.resolve", `{"id":8,"currency":"NGN","status":"resolved","resolution":"declined","transaction":{"reference":"T2","amount":5000}}`),
			action: event.ActionDispute, reference: "T2",
			returns: []event.Return{{ID: "8", Amount: 5000, Currency: "ngn", Outcome: event.OutcomeDisputeWon}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var n Normalized
			var err error
			if c.stripe {
				n, err = NormalizeStripe(c.body, now)
			} else {
				n, err = NormalizePaystack(c.body, now)
			}
			require.NoError(t, err)
			require.Equal(t, c.action, n.Event.Action)
			require.Equal(t, c.reference, n.Event.Reference)
			require.Equal(t, c.returns, n.Event.Returns)
			if c.problem == "" {
				require.Empty(t, n.Problem)
			} else {
				require.Contains(t, n.Problem, c.problem)
			}
		})
	}
}

func TestNormalizeStripeTransferReversed(t *testing.T) {
	t.Parallel()
	n, err := NormalizeStripe(stripeEventJSON("evt_t1", "transfer.reversed", `{"id":"tr_1","object":"transfer","amount":500,"amount_reversed":500,"currency":"usd","reversed":true,"metadata":{"payout_id":"p1"}}`), now)
	require.NoError(t, err)
	require.Equal(t, event.ActionPayoutReversed, n.Event.Action)
	require.Equal(t, "p1", n.Event.PayoutID)
	require.Equal(t, "tr_1", n.Event.Reference)
	require.EqualValues(t, 500, n.Event.Amount)
	require.Empty(t, n.Problem)

	require.EqualValues(t, 500, n.Event.Reversed)

	// A partial reversal says how much is back so far.
	n, err = NormalizeStripe(stripeEventJSON("evt_t2", "transfer.reversed", `{"id":"tr_2","object":"transfer","amount":500,"amount_reversed":100,"currency":"usd","metadata":{"payout_id":"p2"}}`), now)
	require.NoError(t, err)
	require.Empty(t, n.Problem)
	require.EqualValues(t, 500, n.Event.Amount)
	require.EqualValues(t, 100, n.Event.Reversed)

	for _, bad := range []string{`"amount_reversed":0`, `"amount_reversed":600`} {
		n, err = NormalizeStripe(stripeEventJSON("evt_t3", "transfer.reversed", `{"id":"tr_3","object":"transfer","amount":500,`+bad+`,"currency":"usd","metadata":{"payout_id":"p3"}}`), now)
		require.NoError(t, err)
		require.Contains(t, n.Problem, "not a reversal of this transfer", bad)
	}
}
