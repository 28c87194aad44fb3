package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// The OTP route's answers; review/otp's tests enter OTPs at the stand-in.
func TestPaystackOTPRouteAnswersWhatItCanDo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stripe := fixture.Payout{Status: payoutstate.NeedsReview}.Insert(t, b.db.Pool)
	paystack := fixture.Payout{Provider: "paystack", Currency: "ngn", Destination: "RCP_1",
		Status: payoutstate.NeedsReview, ErrorClass: "psp_otp_required"}.Insert(t, b.db.Pool)
	url := func(id string) string { return b.url + "/v1/payouts/" + id + "/paystack-otp" }

	r := call(t, http.MethodPost, url(paystack), viewerToken, `{"otp":"123456"}`)
	require.Equal(t, 403, r.status, r.raw)
	r = call(t, http.MethodPost, url(paystack), operatorToken, `{"otp":"12ab"}`)
	require.Equal(t, 400, r.status, r.raw)
	require.Equal(t, "invalid_request", r.errorCode())
	r = call(t, http.MethodPost, url(paystack), operatorToken, `{"otp":"123456","extra":1}`)
	require.Equal(t, 400, r.status, r.raw)
	r = call(t, http.MethodPost, url(stripe), operatorToken, `{"otp":"123456"}`)
	require.Equal(t, 409, r.status, r.raw)
	require.Equal(t, "not_waiting_for_otp", r.errorCode())
	r = call(t, http.MethodPost, url("0193b0a4-6f1e-7c55-9a6e-0c7e4f1d2a11"), operatorToken, `{"otp":"123456"}`)
	require.Equal(t, 404, r.status, r.raw)
	r = call(t, http.MethodPost, url(paystack), operatorToken, `{"otp":"123456"}`)
	require.Equal(t, 503, r.status, r.raw)
	require.Equal(t, "provider_not_configured", r.errorCode())
}
