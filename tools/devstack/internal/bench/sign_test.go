package bench

import "testing"

// The load signs as Stripe does: a known vector (openssl dgst -hmac) in
// the Stripe-Signature format under the bench's secret.
func TestSignMatchesAKnownVector(t *testing.T) {
	t.Parallel()
	want := "t=1492774577,v1=63f84d534092f1b38041bc0b6726fb771a2e4abeb55a662bcee990362adaa92c"
	if got := sign([]byte(`{"id":"evt_test_webhook","object":"event"}`), 1492774577); got != want {
		t.Fatalf("sign = %s, want %s", got, want)
	}
}
