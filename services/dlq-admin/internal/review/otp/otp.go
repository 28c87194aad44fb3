package otp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
)

// Audit names.
const (
	ActionFinalize = "paystack_otp_finalize"
	targetPayout   = "payout"
)

// Errors the API maps to statuses.
var (
	// ErrNotConfigured: dlq-admin has no Paystack secret key (503).
	ErrNotConfigured = errors.New("PAYSTACK_SECRET_KEY is not set for dlq-admin: it cannot finalize Paystack transfers")
	// ErrNotWaiting: the payout's transfer is not waiting for an OTP (409).
	ErrNotWaiting = errors.New("the payout's transfer is not waiting for an OTP")
	// ErrUnavailable: Paystack could not be asked (503); nothing was sent
	// or its answer is unknown, and the operator may try again.
	ErrUnavailable = errors.New("could not ask Paystack")
)

// RefusedError is Paystack refusing the OTP (a wrong or expired one): 422.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return "Paystack refused the OTP: " + e.Message }

// Finalizer enters OTPs at Paystack.
type Finalizer struct {
	// Paystack is nil when dlq-admin has no Paystack key.
	Paystack *paystackapi.Client
	Payouts  *payouts.Reader
	Pool     *pgxpool.Pool
	Now      func() time.Time
}

// Result is Paystack's answer to an accepted OTP.
type Result struct {
	PayoutID     string `json:"payout_id"`
	TransferCode string `json:"transfer_code"`
	// Status is the transfer's status after the OTP (pending, success…).
	Status  string `json:"status"`
	Message string `json:"message"`
}

// otpShape: Paystack's OTPs are digits; anything else is refused before it
// leaves.
var otpShape = regexp.MustCompile(`^[0-9]{4,10}$`)

type transfer struct {
	TransferCode string `json:"transfer_code"`
	Status       string `json:"status"`
	Reference    string `json:"reference"`
}

// Finalize enters otp for payoutID's transfer on behalf of actor.
func (f *Finalizer) Finalize(ctx context.Context, actor, payoutID, otp string) (Result, error) {
	otp = strings.TrimSpace(otp)
	if !otpShape.MatchString(otp) {
		return Result{}, &input.Invalid{Param: "otp", Reason: "must be the 4 to 10 digits Paystack sent"}
	}
	p, err := f.Payouts.Get(ctx, payoutID)
	if err != nil {
		return Result{}, err
	}
	if p.Provider != string(provider.Paystack) {
		return Result{}, fmt.Errorf("%w: payout %s is paid through %s", ErrNotWaiting, payoutID, p.Provider)
	}
	if f.Paystack == nil {
		return Result{}, ErrNotConfigured
	}
	// Paystack's own record, by our reference: the transfer and its status.
	ans, err := f.Paystack.VerifyTransfer(ctx, payoutID)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if ans.StatusCode == http.StatusNotFound {
		return Result{}, fmt.Errorf("%w: Paystack has no transfer for payout %s", ErrNotWaiting, payoutID)
	}
	if !ans.OK() {
		return Result{}, fmt.Errorf("%w: verify answered %d %s", ErrUnavailable, ans.StatusCode, ans.Message)
	}
	var tr transfer
	if err := json.Unmarshal(ans.Data, &tr); err != nil || tr.TransferCode == "" || tr.Reference != payoutID {
		return Result{}, fmt.Errorf("%w: unreadable transfer for payout %s", ErrUnavailable, payoutID)
	}
	if tr.Status != "otp" {
		return Result{}, fmt.Errorf("%w: Paystack says transfer %s is %s", ErrNotWaiting, tr.TransferCode, tr.Status)
	}
	fin, err := f.Paystack.FinalizeTransfer(ctx, tr.TransferCode, otp)
	if err != nil {
		// The answer was lost: the OTP may have been taken. The audit
		// says so; the transfer's next status tells.
		return Result{}, errors.Join(fmt.Errorf("%w: %w", ErrUnavailable, err),
			f.audit(ctx, actor, payoutID, tr.TransferCode, "unknown", err.Error()))
	}
	if fin.StatusCode >= 500 || fin.Unreadable != nil {
		return Result{}, errors.Join(fmt.Errorf("%w: finalize answered %d %s", ErrUnavailable, fin.StatusCode, fin.Message),
			f.audit(ctx, actor, payoutID, tr.TransferCode, "unknown", fmt.Sprintf("%d %s", fin.StatusCode, fin.Message)))
	}
	if !fin.OK() {
		if err := f.audit(ctx, actor, payoutID, tr.TransferCode, "refused", fin.Message); err != nil {
			return Result{}, err
		}
		return Result{}, &RefusedError{Message: fin.Message}
	}
	var after transfer
	_ = json.Unmarshal(fin.Data, &after) // the status is informative; the transfer's events settle the payout
	if err := f.audit(ctx, actor, payoutID, tr.TransferCode, "accepted", fin.Message); err != nil {
		// Paystack took the OTP; only our record of it failed.
		return Result{}, fmt.Errorf("paystack accepted the OTP for transfer %s, but %w", tr.TransferCode, err)
	}
	return Result{PayoutID: payoutID, TransferCode: tr.TransferCode, Status: after.Status, Message: fin.Message}, nil
}

// audit records one attempt (never the OTP).
func (f *Finalizer) audit(ctx context.Context, actor, payoutID, transferCode, outcome, message string) error {
	return database.InTx(ctx, f.Pool, func(tx pgx.Tx) error {
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionFinalize, TargetType: targetPayout,
			TargetID: payoutID, Detail: map[string]any{"transfer_code": transferCode, "outcome": outcome,
				"paystack_message": message}, At: f.Now()})
	})
}
