package pspsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/pspsync"
)

// connectedPayout is a payout to a connected account's external account
// as payout-worker makes it at the stand-in: a transfer to account
// (transfer_group and metadata[payout_id] the payout id), then, unless
// amount is 0, account's payout to external (Stripe-Account; metadata
// payout_id and transfer) of amount. It returns the two ids.
type connectedPayout struct {
	payoutID, account, external string
	transferAmount, amount      int64
	key                         string
}

func (c connectedPayout) make(t *testing.T, e *env) (transfer, payout string) {
	t.Helper()
	ctx := context.Background()
	api := stripeapi.New(stripeKey, e.psp.URL, nil)
	if c.key == "" {
		c.key = c.payoutID
	}
	meta := map[string]string{"payout_id": c.payoutID}
	tr, err := api.CreateTransfer(ctx, stripeapi.TransferRequest{Money: stripeapi.Money{Amount: c.transferAmount, Currency: "usd"},
		Destination: c.account, TransferGroup: c.payoutID, Metadata: meta, IdempotencyKey: "transfer-" + c.key})
	require.NoError(t, err)
	if c.amount == 0 {
		return tr.ID, ""
	}
	po, err := api.CreatePayout(ctx, stripeapi.PayoutRequest{Money: stripeapi.Money{Amount: c.amount, Currency: "usd"},
		Account: c.account, Destination: c.external, Metadata: map[string]string{"payout_id": c.payoutID, "transfer": tr.ID},
		IdempotencyKey: "connected-payout-" + c.key})
	require.NoError(t, err)
	return tr.ID, po.ID
}

// insertConnected records a payout of 1500 usd in status to account's
// external account, with the transfer and connected payout recorded.
func insertConnected(t *testing.T, e *env, status payoutstate.Status, account, external, transfer, payout string) string {
	t.Helper()
	id := uuid.NewString()
	fixture.Payout{ID: id, UserID: "dave", Destination: account, ExternalAccount: external, Provider: "stripe",
		Status: status, PSPReference: payout}.Insert(t, e.db.Pool)
	if transfer != "" {
		_, err := e.db.Pool.Exec(context.Background(), `UPDATE payouts SET psp_transfer = $2 WHERE id = $1`, id, transfer)
		require.NoError(t, err)
	}
	return id
}

func setRecorded(t *testing.T, e *env, id, transfer, payout string) {
	t.Helper()
	_, err := e.db.Pool.Exec(context.Background(),
		`UPDATE payouts SET psp_transfer = nullif($2, ''), psp_reference = nullif($3, '') WHERE id = $1`, id, transfer, payout)
	require.NoError(t, err)
}

// The payout.paid of a connected account's payout comes from that account
// (event.account): the platform's GET /v1/events never lists it. A run
// reads the events of each connected account with a payout in flight, so
// the webhook that never came is recovered through the webhook path with
// its account, stored once with one outbox row; the next run finds it
// present; the transfer paid and the connected payout paid agree with a
// payout still AWAITING_RESPONSE within the grace.
func TestConnectedPayoutPaidWhoseWebhookNeverCameIsRecoveredOnce(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Overlap: time.Minute, Grace: time.Hour})
	ctx := context.Background()
	id := insertConnected(t, e, payoutstate.Awaiting, "acct_carol", "ba_carol", "", "")
	transfer, payout := connectedPayout{payoutID: id, account: "acct_carol", external: "ba_carol",
		transferAmount: 1500, amount: 1500}.make(t, e)
	setRecorded(t, e, id, transfer, payout)
	e.psp.Settle(t, payout, "paid")
	// A connected account no payout of ours is on: not read (the
	// platform's transfer that funded it is, and is not ours).
	other := connectedPayout{payoutID: uuid.NewString(), account: "acct_stranger", external: "ba_stranger",
		transferAmount: 700, amount: 700}
	strangerTransfer, strangerPayout := other.make(t, e)
	e.psp.Settle(t, strangerPayout, "paid")

	first := e.runOnce()
	pr := first.Report["stripe"]
	require.Equal(t, 1, pr.ConnectedAccounts, "%+v", pr)
	require.Empty(t, pr.Errors)
	require.True(t, pr.CursorAdvance)
	require.Equal(t, 1, pr.ConnectedPayoutsChecked)
	require.Len(t, first.Disagreements, 1, "%+v", first.Disagreements)
	require.Equal(t, pspsync.UnknownPayout, first.Disagreements[0].Kind)
	require.Equal(t, strangerTransfer, first.Disagreements[0].PSPObjectID)

	var eventID, account string
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT event_id, payload->>'account' FROM webhook_events
		WHERE provider = 'stripe' AND event_type = 'payout.paid' AND object_id = $1`, payout).Scan(&eventID, &account))
	require.Equal(t, "acct_carol", account)
	require.Contains(t, pr.RecoveredIDs, eventID)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM transaction_outbox WHERE payload->>'event_id' = $1`, eventID),
		"one outbox row, as a webhook")
	require.Equal(t, "acct_carol", e.str(`SELECT payload->>'account' FROM transaction_outbox WHERE payload->>'event_id' = $1`, eventID),
		"the payout worker sees the connected account the event came from")
	require.Zero(t, e.count(`SELECT count(*) FROM webhook_events WHERE object_id = $1`, strangerPayout),
		"an account with no payout of ours is not read")

	second := e.runOnce()
	require.NotContains(t, second.Report["stripe"].RecoveredIDs, eventID)
	require.Equal(t, 1, second.Report["stripe"].ConnectedAccounts)
	require.Zero(t, second.Report["stripe"].Recovered)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, eventID), "stored exactly once")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM transaction_outbox WHERE payload->>'event_id' = $1`, eventID))
}

// Both levels of a payout to a connected account's external account are
// compared. Each payout here disagrees on one thing and is flagged with
// its own kind and level: a second transfer (a double payment naming
// both), the connected payout's amount, its external account, the
// connected payout failed for a payout SUCCEEDED here, and a SUCCEEDED
// payout with no connected payout at all. A payout in flight whose
// transfer moved and whose connected payout is still pending agrees (the
// transfer alone is not "paid"), and so does the one that agrees in
// everything.
func TestConnectedPayoutsAreComparedOnBothLevels(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Grace: 0})
	ids := map[string]string{}
	mk := func(name string, status payoutstate.Status, c connectedPayout, settle string) (string, string) {
		account := "acct_" + name
		ids[name] = insertConnected(t, e, status, account, "ba_"+name, "", "")
		c.payoutID, c.account = ids[name], account
		if c.external == "" {
			c.external = "ba_" + name
		}
		tr, po := c.make(t, e)
		setRecorded(t, e, ids[name], tr, po)
		if settle != "" {
			e.psp.Settle(t, po, settle)
		}
		return tr, po
	}
	firstTransfer, _ := mk("double", payoutstate.Succeeded, connectedPayout{transferAmount: 1500, amount: 1500}, "paid")
	secondTransfer, _ := connectedPayout{payoutID: ids["double"], account: "acct_double", transferAmount: 1500, key: "again"}.make(t, e)
	_, amountPayout := mk("amount", payoutstate.Succeeded, connectedPayout{transferAmount: 1500, amount: 1400}, "paid")
	_, cardPayout := mk("card", payoutstate.Succeeded, connectedPayout{transferAmount: 1500, amount: 1500, external: "card_card"}, "paid")
	_, failedPayout := mk("failed", payoutstate.Succeeded, connectedPayout{transferAmount: 1500, amount: 1500}, "failed")
	noPayoutTransfer, _ := mk("nopayout", payoutstate.Succeeded, connectedPayout{transferAmount: 1500}, "")
	mk("inflight", payoutstate.Awaiting, connectedPayout{transferAmount: 1500, amount: 1500}, "")
	mk("agreed", payoutstate.Succeeded, connectedPayout{transferAmount: 1500, amount: 1500}, "paid")

	r := e.runOnce()
	require.Empty(t, r.Report["stripe"].Errors)
	require.Equal(t, 7, r.Report["stripe"].ConnectedPayoutsChecked)
	got := map[string][]pspsync.Disagreement{}
	for _, d := range r.Disagreements {
		got[d.PayoutID] = append(got[d.PayoutID], d)
	}
	only := func(name, kind, level string) pspsync.Disagreement {
		t.Helper()
		require.Len(t, got[ids[name]], 1, "%s: %+v", name, got[ids[name]])
		d := got[ids[name]][0]
		require.Equal(t, kind, d.Kind, "%s: %+v", name, d)
		require.Equal(t, level, d.Level, "%s: %+v", name, d)
		return d
	}
	double := only("double", pspsync.DoublePayment, pspsync.LevelTransfer)
	require.ElementsMatch(t, []string{firstTransfer, secondTransfer}, double.PSPObjectIDs, "both transfers are named")
	require.Contains(t, double.Detail, secondTransfer)
	require.Equal(t, pspsync.DoublePayment, r.Disagreements[0].Kind, "a double payment is listed first")

	amount := only("amount", pspsync.AmountMismatch, pspsync.LevelConnectedPayout)
	require.Equal(t, amountPayout, amount.PSPObjectID)
	require.Contains(t, amount.Detail, "1400")
	require.Contains(t, only("card", pspsync.DestinationMismatch, pspsync.LevelConnectedPayout).Detail, cardPayout+" paid 1500 usd to card_card on acct_card")
	failed := only("failed", pspsync.SucceededNotPaid, pspsync.LevelConnectedPayout)
	require.Equal(t, failedPayout, failed.PSPObjectID)
	require.Equal(t, "failed", failed.PSPStatus)
	nopayout := only("nopayout", pspsync.SucceededNotPaid, pspsync.LevelConnectedPayout)
	require.Contains(t, nopayout.Detail, "no payout on acct_nopayout")
	require.Equal(t, noPayoutTransfer, e.str(`SELECT psp_transfer FROM payouts WHERE id = $1`, ids["nopayout"]))
	require.Empty(t, got[ids["inflight"]], "a transfer made and a connected payout pending: in flight")
	require.Empty(t, got[ids["agreed"]])
	require.Len(t, r.Disagreements, 5, "%+v", r.Disagreements)

	// Objects recorded here and not listed are read by their ids; a PSP
	// that has neither disagrees on both levels, each its own subject.
	ghost := insertConnected(t, e, payoutstate.Succeeded, "acct_ghost", "ba_ghost", "tr_ghost", "po_ghost")
	r = e.runOnce()
	require.Empty(t, r.Report["stripe"].Errors)
	levels := map[string]pspsync.Disagreement{}
	for _, d := range r.Disagreements {
		if d.PayoutID == ghost {
			levels[d.Level] = d
		}
	}
	require.Len(t, levels, 2, "%+v", r.Disagreements)
	for level, pspID := range map[string]string{pspsync.LevelTransfer: "tr_ghost", pspsync.LevelConnectedPayout: "po_ghost"} {
		require.Equal(t, pspsync.SucceededNotPaid, levels[level].Kind, level)
		require.Equal(t, pspID, levels[level].PSPObjectID, level)
		require.Equal(t, "not_found", levels[level].PSPStatus, level)
	}
	require.Len(t, r.Disagreements, 7, "%+v", r.Disagreements)

	// The connected level is its own subject, stored apart from a
	// disagreement of the same kind on the transfer level.
	for subject, kind := range map[string]string{
		ids["amount"] + "/connected_payout": pspsync.AmountMismatch, ghost: pspsync.SucceededNotPaid,
		ghost + "/connected_payout": pspsync.SucceededNotPaid, ids["double"]: pspsync.DoublePayment,
	} {
		require.Equal(t, 1, e.count(`SELECT count(*) FROM psp_disagreements WHERE kind = $1 AND subject = $2 AND cleared_at IS NULL`,
			kind, subject), subject)
	}
}

func (e *env) str(q string, args ...any) string {
	e.t.Helper()
	var s string
	require.NoError(e.t, e.db.Pool.QueryRow(context.Background(), q, args...).Scan(&s))
	return s
}
