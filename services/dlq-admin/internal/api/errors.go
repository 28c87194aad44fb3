package api

import (
	"errors"
	"net/http"

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/endpoints"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/erasure"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/pspruns"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/otp"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/resolution"
)

var (
	errUnauthorized = errors.New("missing or invalid bearer token")
	errForbidden    = errors.New("this action needs the operator role")
)

// fail answers err with its status and the contract's error shape. It is the
// one place status codes are chosen.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := classify(err)
	if status >= 500 {
		a.Logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"failed", fault.What(err), "error", err.Error())
	}
	httpserver.WriteError(w, status, code, msg)
}

func classify(err error) (status int, code, message string) {
	var badInput *input.Invalid
	var badBody *bodyError
	var otpRefused *otp.RefusedError
	var erasureRefused *erasure.RefusedError
	switch {
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, "unauthorized", err.Error()
	case errors.Is(err, errForbidden):
		return http.StatusForbidden, "forbidden", err.Error()
	case errors.As(err, &badInput):
		// A parameter the API cannot read (a bad time, a non-numeric id) or
		// a value an area refuses: the message names it.
		return http.StatusBadRequest, "invalid_request", "invalid " + badInput.Error()
	case errors.As(err, &badBody):
		return http.StatusBadRequest, "invalid_request", "invalid " + badBody.Error()
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "not_found", "no dead letter with this id"
	case errors.Is(err, payouts.ErrPayoutNotFound):
		return http.StatusNotFound, "not_found", "no payout with this id"
	case errors.Is(err, replay.ErrJobNotFound):
		return http.StatusNotFound, "not_found", "no replay job with this id"
	case errors.Is(err, recon.ErrNoRun):
		return http.StatusNotFound, "not_found", "no reconciliation has run yet; POST /v1/reconciliation runs one"
	case errors.Is(err, pspruns.ErrNotFound):
		return http.StatusNotFound, "not_found", "no such PSP reconciliation run; POST /v1/psp-reconciliation requests one"
	case errors.Is(err, pspruns.ErrBusy):
		// One run at a time: the caller reads the active one with GET.
		return http.StatusConflict, "conflict", err.Error()
	case errors.Is(err, recon.ErrBusy):
		// Checks run one at a time; the caller can read the result of the
		// running one with GET when it finishes.
		return http.StatusConflict, "conflict", err.Error()
	case errors.Is(err, replay.ErrNotOpen):
		// Replayed or discarded already: a second replay must not happen.
		return http.StatusConflict, "conflict", err.Error()
	case errors.Is(err, replay.ErrHoldsMoney):
		// Discarding would strand a payout's hold: resolve the payout first.
		return http.StatusConflict, "holds_money", err.Error()
	case errors.Is(err, replay.ErrJobFinished):
		return http.StatusConflict, "conflict", err.Error()
	case errors.Is(err, replay.ErrNotReplayable):
		return http.StatusUnprocessableEntity, "not_replayable", err.Error()
	case errors.Is(err, resolution.ErrNotInReview), errors.Is(err, resolution.ErrInFlight),
		errors.Is(err, approval.ErrDecided):
		return http.StatusConflict, "conflict", err.Error()
	case errors.Is(err, approval.ErrSameOperator):
		return http.StatusForbidden, "forbidden", err.Error()
	case errors.Is(err, otp.ErrNotWaiting):
		return http.StatusConflict, "not_waiting_for_otp", err.Error()
	case errors.As(err, &otpRefused):
		return http.StatusUnprocessableEntity, "otp_refused", err.Error()
	case errors.Is(err, otp.ErrNotConfigured):
		return http.StatusServiceUnavailable, "provider_not_configured", err.Error()
	case errors.Is(err, otp.ErrUnavailable):
		return http.StatusServiceUnavailable, "psp_unavailable", err.Error()
	case errors.Is(err, resolution.ErrNotFound):
		return http.StatusNotFound, "not_found", "no resolution with this id"
	case errors.Is(err, approval.ErrNotFound):
		return http.StatusNotFound, "not_found", "no approval with this id"
	case errors.Is(err, endpoints.ErrNotFound), errors.Is(err, endpoints.ErrMessageNotFound),
		errors.Is(err, endpoints.ErrDeliveryNotFound):
		return http.StatusNotFound, "not_found", err.Error()
	case errors.Is(err, erasure.ErrUnknownUser):
		return http.StatusNotFound, "unknown_user", err.Error()
	case errors.Is(err, erasure.ErrNotFound):
		return http.StatusNotFound, "not_found", "no erasure with this id"
	case errors.As(err, &erasureRefused):
		// Money is held or on its way: erasing now would strand it.
		return http.StatusConflict, "erasure_refused", err.Error()
	case errors.Is(err, erasure.ErrPending):
		return http.StatusConflict, "conflict", err.Error()
	case errors.Is(err, erasure.ErrNotConfigured):
		return http.StatusServiceUnavailable, "erasure_not_configured", err.Error()
	case errors.Is(err, endpoints.ErrDelivered):
		return http.StatusConflict, "conflict", err.Error()
	default:
		// Postgres (or Kafka, or the job queue) did not answer. Reads are
		// safe to retry; so are writes, which are one transaction each and
		// either happened or did not (a retried replay of a letter that
		// was replayed answers 409). The area that failed marked its error
		// (package fault), so the operator reads which part is down.
		what := fault.What(err)
		if what == "" {
			what = "dlq-admin"
		}
		return http.StatusServiceUnavailable, "unavailable", what + " is unavailable; retry later"
	}
}
