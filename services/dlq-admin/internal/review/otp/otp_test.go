package otp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/otp"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
)

func TestMain(m *testing.M) { os.Exit(psptest.Main(m)) }

const paystackKey = "sk_test_paystack"

// otpPayout is a Paystack payout in review whose transfer the stand-in
// holds in status otp, as Paystack does until the OTP is entered.
func otpPayout(t *testing.T, db *pgtest.DB, psp *psptest.StandIn, api *paystackapi.Client) string {
	t.Helper()
	id := fixture.Payout{Provider: "paystack", Currency: "ngn", Destination: "RCP_otp", Amount: 50_000,
		Status: payoutstate.NeedsReview, ErrorClass: "psp_otp_required"}.Insert(t, db.Pool)
	psp.SetFaults(t, psptest.Faults{Provider: "paystack", OTPFor: "1h"})
	ans, err := api.InitiateTransfer(context.Background(), paystackapi.TransferRequest{Amount: 50_000, Currency: "ngn",
		Recipient: "RCP_otp", Reference: id, Reason: "test"}, "")
	require.NoError(t, err)
	require.True(t, ans.OK(), "%d %s", ans.StatusCode, ans.Message)
	psp.ClearFaults(t)
	return id
}

func transferStatus(t *testing.T, api *paystackapi.Client, payoutID string) string {
	t.Helper()
	ans, err := api.VerifyTransfer(context.Background(), payoutID)
	require.NoError(t, err)
	var tr struct {
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal(ans.Data, &tr))
	return tr.Status
}

type auditRow struct {
	Actor, Action, Target string
	Detail                map[string]any
	Raw                   string
}

func audits(t *testing.T, db *pgtest.DB, payoutID string) []auditRow {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT actor, action, target_id, detail::text FROM audit_log WHERE target_id = $1 ORDER BY id`, payoutID)
	require.NoError(t, err)
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var r auditRow
		require.NoError(t, rows.Scan(&r.Actor, &r.Action, &r.Target, &r.Raw))
		require.NoError(t, json.Unmarshal([]byte(r.Raw), &r.Detail))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// newFinalizer is a Finalizer on a new database and a Paystack stand-in.
func newFinalizer(t *testing.T) (*pgtest.DB, *psptest.StandIn, *paystackapi.Client, *otp.Finalizer) {
	t.Helper()
	db := pgtest.New(t)
	psp := psptest.Start(t, map[string]string{"PSP_PAYSTACK_SECRET_KEY": paystackKey})
	api := paystackapi.New(paystackKey, psp.URL, &http.Client{Timeout: 10 * time.Second})
	return db, psp, api, &otp.Finalizer{Paystack: api, Payouts: payouts.New(db.Pool), Pool: db.Pool, Now: time.Now}
}

func TestAnOperatorFinishesATransferWaitingForItsOTP(t *testing.T) {
	db, psp, api, f := newFinalizer(t)
	ctx := context.Background()
	id := otpPayout(t, db, psp, api)
	require.Equal(t, "otp", transferStatus(t, api, id))

	// A wrong OTP: Paystack refuses it, the transfer still waits, and
	// the attempt is on the record.
	_, err := f.Finalize(ctx, "bob", id, "000000")
	var refused *otp.RefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, "otp", transferStatus(t, api, id))

	// Not an OTP at all: refused here, nothing sent.
	_, err = f.Finalize(ctx, "bob", id, "12ab")
	var invalid *input.Invalid
	require.ErrorAs(t, err, &invalid)

	res, err := f.Finalize(ctx, "bob", id, "123456")
	require.NoError(t, err)
	require.NotEmpty(t, res.TransferCode)
	require.NotEqual(t, "otp", transferStatus(t, api, id), "Paystack took the OTP")

	// Once it no longer waits, another OTP is not sent.
	_, err = f.Finalize(ctx, "bob", id, "123456")
	require.ErrorIs(t, err, otp.ErrNotWaiting)

	rows := audits(t, db, id)
	require.Len(t, rows, 2, "the refused and the accepted attempt; nothing for what was never sent")
	require.Equal(t, []string{"refused", "accepted"}, []string{rows[0].Detail["outcome"].(string), rows[1].Detail["outcome"].(string)})
	for _, r := range rows {
		require.Equal(t, "bob", r.Actor)
		require.Equal(t, otp.ActionFinalize, r.Action)
		require.Equal(t, res.TransferCode, r.Detail["transfer_code"])
		require.False(t, strings.Contains(r.Raw, "123456") || strings.Contains(r.Raw, "000000"), "the OTP is never stored: %s", r.Raw)
	}
}

func TestOnlyAPaystackTransferWaitingForAnOTPTakesOne(t *testing.T) {
	db, _, _, f := newFinalizer(t)
	ctx := context.Background()

	stripe := fixture.Payout{Status: payoutstate.NeedsReview}.Insert(t, db.Pool)
	_, err := f.Finalize(ctx, "bob", stripe, "123456")
	require.ErrorIs(t, err, otp.ErrNotWaiting)

	neverSent := fixture.Payout{Provider: "paystack", Currency: "ngn", Destination: "RCP_1", Status: payoutstate.NeedsReview}.Insert(t, db.Pool)
	_, err = f.Finalize(ctx, "bob", neverSent, "123456")
	require.ErrorIs(t, err, otp.ErrNotWaiting, "Paystack has no transfer for it")

	_, err = f.Finalize(ctx, "bob", "0193b0a4-6f1e-7c55-9a6e-0c7e4f1d2a11", "123456")
	require.ErrorIs(t, err, payouts.ErrPayoutNotFound)

	unconfigured := &otp.Finalizer{Payouts: payouts.New(db.Pool), Pool: db.Pool, Now: time.Now}
	_, err = unconfigured.Finalize(ctx, "bob", neverSent, "123456")
	require.ErrorIs(t, err, otp.ErrNotConfigured)
	require.Empty(t, audits(t, db, neverSent))
}
