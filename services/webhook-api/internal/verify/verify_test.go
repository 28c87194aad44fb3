package verify

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestStripe(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	now := time.Now()
	v := NewStripe([]string{"whsec_old", "whsec_new"})
	cases := []struct {
		name   string
		header string
		body   []byte
		want   error
	}{
		{"first secret", SignStripe("whsec_old", body, now), body, nil},
		{"rotated secret", SignStripe("whsec_new", body, now), body, nil},
		{"several v1, one valid", fmt.Sprintf("t=%d,v1=%s,v1=deadbeef", now.Unix(), SignStripe("whsec_new", body, now)[len(fmt.Sprintf("t=%d,v1=", now.Unix())):]), body, nil},
		{"unknown secret", SignStripe("whsec_other", body, now), body, ErrBadSignature},
		{"tampered body", SignStripe("whsec_new", body, now), []byte(`{"id":"evt_2"}`), ErrBadSignature},
		{"missing", "", body, ErrMissingSignature},
		{"garbage", "nonsense", body, ErrBadSignature},
		{"too old", SignStripe("whsec_new", body, now.Add(-6*time.Minute)), body, ErrStale},
		{"just inside tolerance", SignStripe("whsec_new", body, now.Add(-4*time.Minute)), body, nil},
		{"signed in the future", SignStripe("whsec_new", body, now.Add(6*time.Minute)), body, ErrStale},
		{"a clock slightly ahead", SignStripe("whsec_new", body, now.Add(4*time.Minute)), body, nil},
	}
	for _, tc := range cases {
		err := v.Verify(tc.body, tc.header)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := NewStripe(nil).Verify(body, SignStripe("x", body, now)); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("no secrets: %v", err)
	}
}

func TestPaystack(t *testing.T) {
	t.Parallel()
	body := []byte(`{"event":"charge.success","data":{"id":1}}`)
	v := NewPaystack("sk_test_abc")
	if err := v.Verify(body, SignPaystack("sk_test_abc", body)); err != nil {
		t.Fatalf("valid signature refused: %v", err)
	}
	for name, hdr := range map[string]string{
		"wrong key": SignPaystack("sk_test_other", body),
		"not hex":   "zz",
		"truncated": SignPaystack("sk_test_abc", body)[:20],
	} {
		if err := v.Verify(body, hdr); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := v.Verify(body, ""); !errors.Is(err, ErrMissingSignature) {
		t.Errorf("missing: %v", err)
	}
	if err := NewPaystack("").Verify(body, "x"); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("disabled: %v", err)
	}
}

// FuzzStripeVerify: arbitrary headers and bodies never panic and never pass
// without the secret.
func FuzzStripeVerify(f *testing.F) {
	body := []byte(`{"id":"evt_1"}`)
	f.Add(body, SignStripe("whsec_x", body, time.Now()))
	f.Add(body, "t=1,v1=00")
	f.Add([]byte{}, "t=,v1=,v0=")
	f.Add(body, "t=9999999999999999999999,v1=zz")
	v := NewStripe([]string{"whsec_fuzz"})
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		if err := v.Verify(body, header); err == nil {
			t.Fatalf("fuzzed header %q verified without the secret", header)
		}
	})
}

func FuzzPaystackVerify(f *testing.F) {
	f.Add([]byte(`{"event":"charge.success"}`), "abcd")
	f.Add([]byte{}, "")
	v := NewPaystack("sk_fuzz")
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		if err := v.Verify(body, header); err == nil {
			t.Fatalf("fuzzed header %q verified without the secret", header)
		}
	})
}
