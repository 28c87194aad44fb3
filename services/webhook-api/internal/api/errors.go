package api

import (
	"errors"
	"net/http"

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/validation"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/wallets"
)

var (
	errUnauthorized   = errors.New("missing or invalid bearer token")
	errOutOfScope     = errors.New("this API client may not act for this user")
	errIdempotencyKey = errors.New("Idempotency-Key header is required (at most 255 printable ASCII characters)")
	errBadJSON        = errors.New("request body is not valid JSON")
)

// fail answers err with the contract's status and error shape. It is the one
// place status codes are chosen.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := classify(err)
	if errors.Is(err, ingest.ErrOverloaded) || errors.Is(err, errReadingFull) {
		// Counted (and the commit line's logged by ShedLog): a line per request would cost
		// the most exactly when the service has no CPU to spare.
		w.Header().Set("Retry-After", RetryAfter)
		httpserver.WriteError(w, status, code, msg)
		return
	}
	if status >= 500 {
		a.Logger.ErrorContext(r.Context(), "request failed", "route", r.URL.Path, "error", err.Error())
	}
	httpserver.WriteError(w, status, code, msg)
}

func classify(err error) (status int, code, message string) {
	var tooBig *http.MaxBytesError
	var invalid *validation.Error
	var limit *payouts.LimitError
	var coolingOff *payouts.CoolingOffError
	var currency *payouts.CurrencyError
	var refused *destinations.RefusedError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "payload_too_large", "body exceeds the size limit"
	case errors.Is(err, ingest.ErrOverloaded):
		return http.StatusServiceUnavailable, "overloaded", "more webhooks arrive than can be committed; nothing was stored, retry after the Retry-After delay"
	case errors.Is(err, errReadingFull):
		return http.StatusServiceUnavailable, "overloaded", errReadingFull.Error()
	case errors.Is(err, verify.ErrNotConfigured):
		return http.StatusServiceUnavailable, "provider_not_configured", "webhooks from this provider are not configured"
	case errors.Is(err, verify.ErrMissingSignature):
		return http.StatusUnauthorized, "missing_signature", "signature header is missing"
	case errors.Is(err, verify.ErrStale), errors.Is(err, ingest.ErrFromTheFuture):
		return http.StatusUnauthorized, "timestamp_out_of_tolerance", "signature or event timestamp is outside the tolerance"
	case errors.Is(err, verify.ErrBadSignature):
		return http.StatusUnauthorized, "invalid_signature", "signature does not match the body"
	case errors.Is(err, ingest.ErrMalformed), errors.Is(err, ingest.ErrUnstorable):
		return http.StatusBadRequest, "malformed_event", err.Error()
	case errors.Is(err, errBadJSON):
		return http.StatusBadRequest, "invalid_json", err.Error()
	case errors.As(err, &invalid):
		return http.StatusBadRequest, "invalid_request", invalid.Error()
	case errors.Is(err, payouts.ErrRefused):
		return http.StatusBadRequest, "invalid_request", err.Error()
	case errors.Is(err, errIdempotencyKey):
		return http.StatusBadRequest, "idempotency_key_required", err.Error()
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, "unauthorized", err.Error()
	case errors.Is(err, errOutOfScope):
		return http.StatusForbidden, "forbidden", err.Error()
	case errors.Is(err, destinations.ErrNotRegistered):
		return http.StatusUnprocessableEntity, "destination_not_registered",
			"the destination is not an active destination registered for this user and provider (POST /v1/users/{user_id}/destinations)"
	case errors.As(err, &limit):
		return http.StatusUnprocessableEntity, "limit_exceeded", limit.Error()
	case errors.As(err, &coolingOff):
		return http.StatusUnprocessableEntity, "destination_cooling_off", coolingOff.Error()
	case errors.As(err, &currency):
		return http.StatusUnprocessableEntity, "currency_mismatch", currency.Error()
	case errors.As(err, &refused):
		return http.StatusUnprocessableEntity, refused.Code, refused.Error() + "; nothing was registered"
	case errors.Is(err, destinations.ErrRegisteredOtherwise):
		return http.StatusConflict, "destination_registered_otherwise", err.Error()
	case errors.Is(err, destinations.ErrPSPUnavailable):
		return http.StatusServiceUnavailable, "psp_unavailable", err.Error() + "; nothing was registered, retry later"
	case errors.Is(err, destinations.ErrNotFound):
		return http.StatusNotFound, "destination_not_found", "no destination with this id for this user"
	case errors.Is(err, payouts.ErrKeyReused):
		return http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used with a different request"
	case errors.Is(err, payouts.ErrNotCancelable):
		return http.StatusConflict, "payout_not_cancelable", err.Error() + ": only a payout not yet taken up for sending (INITIALIZED) can be canceled"
	case errors.Is(err, payouts.ErrNotFound):
		return http.StatusNotFound, "payout_not_found", "no payout with this id"
	case errors.Is(err, wallets.ErrNotFound):
		return http.StatusNotFound, "wallet_not_found", "no wallet for this user"
	default:
		// Everything else is the database failing to commit: the caller
		// (a PSP, a client with an Idempotency-Key) retries safely.
		return http.StatusServiceUnavailable, "unavailable", "could not commit the request; retry later"
	}
}
