package chaos

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

// paystackCreate makes a Paystack transfer at the stand-in as the worker
// does, and returns the status it was created in.
func paystackCreate(t *testing.T, base, ref string) {
	t.Helper()
	body := fmt.Sprintf(`{"source":"balance","amount":50000,"recipient":"RCP_%s","reference":%q,"currency":"NGN"}`, ref, ref)
	req, err := http.NewRequest(http.MethodPost, base+"/transfer", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk_test_chaos")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "key-"+ref)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create %s: %d", ref, resp.StatusCode)
	}
}

// The OTP fault's bookkeeping against the real stand-in: each Paystack
// transfer held in "otp" is recorded once however often the fault looks,
// with its payout (the reference), and one made after the fault is not.
func TestOTPBookkeepingRecordsEachHeldTransferOnce(t *testing.T) {
	srv, err := psp.New(psp.Config{SettleDelay: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	in := &injector{psp: ts.URL, injected: map[string]int{}}

	if err := in.pspFaults(`{"provider":"paystack","otp_for":"1h"}`); err != nil {
		t.Fatal(err)
	}
	paystackCreate(t, ts.URL, "payout-otp-1")
	if n, err := in.noteOTP(); err != nil || n != 1 {
		t.Fatalf("after one held transfer: %d recorded, %v", n, err)
	}
	paystackCreate(t, ts.URL, "payout-otp-2")
	if n, err := in.noteOTP(); err != nil || n != 2 {
		t.Fatalf("after two held transfers, looked at twice: %d recorded, %v (want 2: each once)", n, err)
	}
	if err := in.pspFaults(""); err != nil {
		t.Fatal(err)
	}
	paystackCreate(t, ts.URL, "payout-after")
	if n, err := in.noteOTP(); err != nil || n != 2 {
		t.Fatalf("a transfer made after the fault: %d recorded, %v (want 2)", n, err)
	}
	got := map[string]bool{}
	for _, o := range in.otpHeld {
		if o.Status != "otp" || o.Provider != "paystack" {
			t.Fatalf("recorded %+v", o)
		}
		got[o.PayoutID] = true
	}
	if !got["payout-otp-1"] || !got["payout-otp-2"] {
		t.Fatalf("recorded payouts %v, want payout-otp-1 and payout-otp-2", got)
	}
}
