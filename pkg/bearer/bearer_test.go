package bearer

import (
	"net/http"
	"testing"
)

func TestParseAndAuthenticate(t *testing.T) {
	t.Parallel()
	s, err := Parse("ops:operator:0123456789abcdef-ops, night:viewer:0123456789abcdef-view", []string{"viewer", "operator"})
	if err != nil {
		t.Fatal(err)
	}
	req := func(h string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		return r
	}
	if tok, ok := s.Authenticate(req("Bearer 0123456789abcdef-ops")); !ok || tok.Name != "ops" || tok.Role != "operator" {
		t.Fatalf("ops token: %+v %v", tok, ok)
	}
	if tok, ok := s.Authenticate(req("bearer 0123456789abcdef-view")); !ok || tok.Role != "viewer" {
		t.Fatalf("viewer token (case-insensitive scheme): %+v %v", tok, ok)
	}
	for _, h := range []string{"", "Bearer", "Bearer wrong-token-000000000", "Basic 0123456789abcdef-ops", "Bearer 0123456789abcdef-op"} {
		if _, ok := s.Authenticate(req(h)); ok {
			t.Errorf("header %q must be refused", h)
		}
	}
	empty, err := Parse("", nil)
	if err != nil || empty.Len() != 0 {
		t.Fatal(err)
	}
	if _, ok := empty.Authenticate(req("Bearer anything-at-all-123")); ok {
		t.Fatal("no tokens configured must refuse everyone")
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	roles := []string{"viewer", "operator"}
	for spec, r := range map[string][]string{
		"ops:admin:0123456789abcdef": roles,
		"ops:0123456789abcdef":       roles,
		"ops:short":                  nil,
		":0123456789abcdef":          nil,
		"a:operator:0123456789abcdef,a:viewer:0123456789abcdef0": roles,
		"a:0123456789abcdef,b:0123456789abcdef":                  nil,
	} {
		if _, err := Parse(spec, r); err == nil {
			t.Errorf("Parse(%q) must fail", spec)
		}
	}
}

// A client rotating its token lists its name twice: both secrets work and
// both authenticate as the same name.
func TestRotation(t *testing.T) {
	t.Parallel()
	s, err := Parse("acme:old-secret-0123456789,acme:new-secret-0123456789", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"old-secret-0123456789", "new-secret-0123456789"} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		if tok, ok := s.Authenticate(r); !ok || tok.Name != "acme" {
			t.Errorf("%s: %+v %v", secret, tok, ok)
		}
	}
}
