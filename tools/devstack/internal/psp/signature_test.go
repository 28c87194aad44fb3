package psp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

// The stand-in signs byte for byte as the PSPs do: known vectors (openssl
// dgst -hmac) in Stripe's Stripe-Signature and Paystack's
// x-paystack-signature formats.
func TestSignaturesMatchKnownVectors(t *testing.T) {
	t.Parallel()
	require.Equal(t, "t=1492774577,v1=88a022085c6bdb887b02cb26ff76dd681234d9675c0f22844059f55552a8883a",
		psp.StripeSignature("whsec_test_secret", time.Unix(1492774577, 0), []byte(`{"id":"evt_test_webhook","object":"event"}`)))
	require.Equal(t, "7ecdbc80deb6092e30719c69db162a73a71f8217ec10e097fa8f19e01475da6c45f70415c206e13f55fd29e33da8a3da29143f0236836a94bf9b536c24496c5d",
		psp.PaystackSignature("sk_test_paystack", []byte(`{"event":"charge.success","data":{"reference":"ref_1"}}`)))
}
