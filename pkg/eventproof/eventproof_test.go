package eventproof_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

const (
	keyA = "event-signing-key-a-0123456789abcdef"
	keyB = "event-signing-key-b-0123456789abcdef"
)

// typical is a Stripe payment_intent.succeeded credit as webhook-api
// publishes it, with a kilobyte of raw body.
func typical() event.PSPEvent {
	live := false
	return event.PSPEvent{Provider: "stripe", EventID: "evt_3QbenchAbCdEf0123456789", Type: "payment_intent.succeeded",
		Action: event.ActionCredit, UserID: "user-0123456789", Amount: 5000, Currency: "usd",
		Reference: "pi_3QbenchAbCdEf0123456789", ObjectStatus: "succeeded", Livemode: &live,
		OccurredAt: time.Date(2026, 11, 26, 18, 0, 0, 123456789, time.UTC),
		Raw:        json.RawMessage(`{"id":"evt_3QbenchAbCdEf0123456789","object":"event","pad":"` + strings.Repeat("x", 1000) + `"}`)}
}

func keys(t testing.TB, current, previous string) *eventproof.Keys {
	t.Helper()
	k, err := eventproof.New(current, previous)
	require.NoError(t, err)
	return k
}

func TestAProofVerifiesOnlyItsOwnEvent(t *testing.T) {
	t.Parallel()
	k := keys(t, keyA, "")
	e := typical()
	proof := k.Sign(e)
	require.NoError(t, k.Verify(e, proof))

	live, other := true, typical()
	forgeries := map[string]func(e *event.PSPEvent){
		"amount":    func(e *event.PSPEvent) { e.Amount++ },
		"user":      func(e *event.PSPEvent) { e.UserID = "mallory" },
		"currency":  func(e *event.PSPEvent) { e.Currency = "eur" },
		"reference": func(e *event.PSPEvent) { e.Reference = "pi_other" },
		"action":    func(e *event.PSPEvent) { e.Action = event.ActionRefund },
		"event id":  func(e *event.PSPEvent) { e.EventID = "evt_other" },
		"provider":  func(e *event.PSPEvent) { e.Provider = "paystack" },
		"livemode":  func(e *event.PSPEvent) { e.Livemode = &live },
		"no mode":   func(e *event.PSPEvent) { e.Livemode = nil },
		"account":   func(e *event.PSPEvent) { e.Account = "acct_x" },
		"payout":    func(e *event.PSPEvent) { e.PayoutID = "0190" },
		"stale":     func(e *event.PSPEvent) { e.Stale = true },
		"time":      func(e *event.PSPEvent) { e.OccurredAt = e.OccurredAt.Add(time.Nanosecond) },
		"returns": func(e *event.PSPEvent) {
			e.Returns = []event.Return{{ID: "re_1", Amount: 5000, Currency: "usd", Outcome: event.OutcomeRefunded}}
		},
		// Length prefixes: moving a character from one field to the next is
		// another event.
		"boundary": func(e *event.PSPEvent) { e.UserID, e.Currency = e.UserID+"u", "sd" },
	}
	for name, forge := range forgeries {
		f := other
		forge(&f)
		require.ErrorIs(t, k.Verify(f, proof), eventproof.ErrUnproven, name)
	}
	for _, bad := range []string{"", "v1", "v1:" + k.CurrentKeyID(), "v2:" + strings.TrimPrefix(proof, "v1:"),
		proof[:len(proof)-1] + "0", strings.ToUpper(proof)} {
		require.ErrorIs(t, k.Verify(e, bad), eventproof.ErrUnproven, bad)
	}
	// Another key's proof, and a proof claiming our key id with another key.
	require.ErrorIs(t, k.Verify(e, keys(t, keyB, "").Sign(e)), eventproof.ErrUnproven)
	forged := "v1:" + k.CurrentKeyID() + ":" + strings.Split(keys(t, keyB, "").Sign(e), ":")[2]
	require.ErrorIs(t, k.Verify(e, forged), eventproof.ErrUnproven)
}

// A rotation: the worker holds the new key and the old as previous; both
// proofs verify; once the previous key is dropped the old ones do not.
func TestKeyRotationAcceptsThePreviousKey(t *testing.T) {
	t.Parallel()
	e := typical()
	old, rotating, rotated := keys(t, keyA, ""), keys(t, keyB, keyA), keys(t, keyB, "")
	require.NoError(t, rotating.Verify(e, old.Sign(e)))
	require.NoError(t, rotating.Verify(e, rotated.Sign(e)))
	require.ErrorIs(t, rotated.Verify(e, old.Sign(e)), eventproof.ErrUnproven, "the old key, once dropped")
	require.ErrorIs(t, old.Verify(e, rotating.Sign(e)), eventproof.ErrUnproven, "a verifier without the new key")
}

func TestKeysMustBeLongEnough(t *testing.T) {
	t.Parallel()
	_, err := eventproof.New("short", "")
	require.Error(t, err)
	_, err = eventproof.New(keyA, "short")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "short", "a key is never quoted")
}

// The outbox stores the payload as jsonb, which rewrites the bytes: the
// proof is over the fields, so it survives Postgres's round trip.
func TestTheProofSurvivesAJSONBRoundTrip(t *testing.T) {
	t.Parallel()
	tx := pgtest.Tx(t)
	k := keys(t, keyA, "")
	e := typical()
	e.Returns = []event.Return{{ID: "re_1", Amount: 200, Currency: "usd", Outcome: event.OutcomeRefunded}}
	proof := k.Sign(e)
	b, err := json.Marshal(e)
	require.NoError(t, err)
	var back []byte
	require.NoError(t, tx.QueryRow(context.Background(), `SELECT $1::jsonb::text`, string(b)).Scan(&back))
	require.NotEqual(t, string(b), string(back), "jsonb rewrote the bytes")
	var got event.PSPEvent
	require.NoError(t, json.Unmarshal(back, &got))
	require.NoError(t, k.Verify(got, proof))
}

func TestRequiredForEveryMoneyAction(t *testing.T) {
	t.Parallel()
	for _, a := range []event.Action{event.ActionCredit, event.ActionRefund, event.ActionDispute,
		event.ActionPayoutPaid, event.ActionPayoutFailed, event.ActionPayoutReversed} {
		require.True(t, eventproof.Required(a), a)
	}
	require.False(t, eventproof.Required(event.ActionNone))
	require.False(t, errors.Is(nil, eventproof.ErrUnproven))
}

// What the worker pays per event for the proof, next to the alternative:
// looking the event up in webhook_events (one indexed read on a warm local
// Postgres, the cheapest it can be; the worker would also need the row's
// fields compared and a grant on the table).
func BenchmarkSign(b *testing.B) {
	k, e := keys(b, keyA, ""), typical()
	b.ReportAllocs()
	for b.Loop() {
		_ = k.Sign(e)
	}
}

func BenchmarkVerify(b *testing.B) {
	k, e := keys(b, keyA, keyB), typical()
	proof := k.Sign(e)
	b.ReportAllocs()
	for b.Loop() {
		if err := k.Verify(e, proof); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStoredRowLookup(b *testing.B) {
	db := pgtest.New(b)
	ctx := context.Background()
	e := typical()
	_, err := db.Pool.Exec(ctx, `INSERT INTO webhook_events (provider, event_id, event_type, object_id, user_id, amount,
		currency, occurred_at, payload, correlation_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'c')`,
		e.Provider, e.EventID, e.Type, e.Reference, e.UserID, e.Amount, e.Currency, e.OccurredAt, string(e.Raw))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		var user, currency string
		var amount int64
		if err := db.Pool.QueryRow(ctx, `SELECT user_id, amount, currency FROM webhook_events WHERE provider = $1 AND event_id = $2`,
			e.Provider, e.EventID).Scan(&user, &amount, &currency); err != nil {
			b.Fatal(err)
		}
	}
}
