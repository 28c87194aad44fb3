package outbound_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/aegis-payments/aegis/pkg/outbound"
)

// The specification's own Go library verifies what Sign writes, with each
// secret of a rotation's overlap alone, and refuses it under another secret
// or another body.
func TestStandardWebhooksLibraryVerifiesOurSignature(t *testing.T) {
	t.Parallel()
	oldSecret, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	newSecret, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	other, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"event_id":"payout:p1:SUCCEEDED","type":"payout.succeeded","sequence":7}`)
	now := time.Now()

	both, err := outbound.NewSigner(newSecret, oldSecret)
	if err != nil {
		t.Fatal(err)
	}
	headers := http.Header{}
	for k, v := range both.Headers("payout:p1:SUCCEEDED", now, body) {
		headers.Set(k, v)
	}
	if n := len(strings.Split(headers.Get(outbound.HeaderSignature), " ")); n != 2 {
		t.Fatalf("two secrets give %d signatures, want 2", n)
	}
	for name, secret := range map[string]string{"old": oldSecret, "new": newSecret} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, headers); err != nil {
			t.Errorf("a receiver with the %s secret: %v", name, err)
		}
		if err := wh.Verify([]byte(`{"amount":1}`), headers); err == nil {
			t.Errorf("a receiver with the %s secret verified another body", name)
		}
	}
	wh, err := standardwebhooks.NewWebhook(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, headers); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("another secret: %v, want no matching signature", err)
	}

	// The library's own signature is the one we write.
	lib, _ := standardwebhooks.NewWebhook(newSecret)
	want, _ := lib.Sign("msg_1", now, body)
	single, _ := outbound.NewSigner(newSecret)
	if got := single.Sign("msg_1", now, body); got != want {
		t.Errorf("Sign = %q, the library signs %q", got, want)
	}
}

func TestParseSecretRefusesWhatIsNotAStandardWebhooksSecret(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "whsec_", "whsec_not base64!", "whsec_c2hvcnQ=", "sk_live_abc", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		if _, err := outbound.ParseSecret(s); !errors.Is(err, outbound.ErrSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrSecret", s, err)
		}
	}
	s, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if key, err := outbound.ParseSecret(s); err != nil || len(key) != 32 {
		t.Errorf("a new secret: %d bytes, %v", len(key), err)
	}
}

func TestTypeFilters(t *testing.T) {
	t.Parallel()
	if err := outbound.CheckTypes([]string{"payout.*", "refund.posted", "dispute.*"}); err != nil {
		t.Errorf("valid filter refused: %v", err)
	}
	for _, bad := range [][]string{{"*"}, {"payout"}, {"payouts.*"}, {"payout.paid"}, {"pay*"}, {""}} {
		if err := outbound.CheckTypes(bad); err == nil {
			t.Errorf("CheckTypes(%q) accepted", bad)
		}
	}
	cases := []struct {
		types []string
		typ   string
		want  bool
	}{
		{nil, "payout.failed", true},
		{[]string{"payout.*"}, "payout.failed", true},
		{[]string{"payout.*"}, "refund.posted", false},
		{[]string{"refund.posted"}, "refund.posted", true},
		{[]string{"refund.posted"}, "refund.reversed", false},
	}
	for _, c := range cases {
		if got := outbound.Wants(c.types, c.typ); got != c.want {
			t.Errorf("Wants(%q, %q) = %v, want %v", c.types, c.typ, got, c.want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	prod := outbound.Policy{}
	for _, ok := range []string{"https://hooks.example.com/aegis", "https://93.184.216.34:8443/x?token=abc"} {
		if _, err := prod.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{
		"http://hooks.example.com/aegis",
		"https://user:pass@hooks.example.com/",
		"https://hooks.example.com/#frag",
		"https://127.0.0.1/",
		"https://10.1.2.3/",
		"https://169.254.169.254/latest/meta-data",
		"https://[fd00:ec2::254]/",
		"https://[::1]/",
		"https://100.64.0.1/",
		"https://localhost/",
		"https://metadata.google.internal/",
		"https:///nohost",
		"ftp://example.com/",
		"https://0.0.0.0/",
		"not a url at all",
	} {
		_, err := prod.CheckURL(bad)
		if !errors.Is(err, outbound.ErrURL) {
			t.Errorf("CheckURL(%q) = %v, want ErrURL", bad, err)
			continue
		}
		if strings.Contains(err.Error(), "pass") {
			t.Errorf("the error quotes the credentials: %v", err)
		}
	}
	dev := outbound.Policy{AllowHTTP: true, AllowPrivate: true}
	if _, err := dev.CheckURL("http://127.0.0.1:9000/hook"); err != nil {
		t.Errorf("development policy: %v", err)
	}
	if _, err := dev.CheckURL("http://u:p@127.0.0.1/"); err == nil {
		t.Error("credentials accepted under the development policy")
	}
}

// A name that resolves to a refused address is refused when the connection
// is made, whatever it resolved to when it was registered.
func TestControlRefusesAPrivateAddressAtConnectTime(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dc := net.Dialer{Timeout: time.Second, ControlContext: outbound.Policy{}.Control}
	if _, err := dc.DialContext(context.Background(), "tcp", ln.Addr().String()); !errors.Is(err, outbound.ErrURL) {
		t.Fatalf("dial to loopback = %v, want ErrURL", err)
	}
	allowed := net.Dialer{Timeout: time.Second, ControlContext: outbound.Policy{AllowPrivate: true}.Control}
	c, err := allowed.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("development policy: %v", err)
	}
	c.Close()
}

func TestRedactKeepsPathQueryAndCredentialsOut(t *testing.T) {
	t.Parallel()
	got := outbound.Redact("https://u:secret@hooks.example.com/t/abc123?token=xyz")
	if strings.Contains(got, "secret") || strings.Contains(got, "abc123") || strings.Contains(got, "xyz") {
		t.Errorf("Redact = %q", got)
	}
	if !strings.Contains(got, "hooks.example.com") {
		t.Errorf("Redact = %q, want the host", got)
	}
}
