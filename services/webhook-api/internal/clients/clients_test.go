package clients

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func authenticate(t *testing.T, s *Set, token string) (Client, bool) {
	t.Helper()
	var got Client
	var ok bool
	h := s.Middleware(func(http.ResponseWriter, *http.Request) {})(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got, ok = FromContext(r.Context())
	}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	h.ServeHTTP(httptest.NewRecorder(), r)
	return got, ok
}

func TestScopesAndRotation(t *testing.T) {
	t.Parallel()
	s, err := Parse("shop(shop-*|vip:42):shop-old-token-0123456789, shop:shop-new-token-0123456789, support(*):support-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 {
		t.Fatalf("two clients, got %d", s.Len())
	}
	for _, tok := range []string{"shop-old-token-0123456789", "shop-new-token-0123456789"} {
		c, ok := authenticate(t, s, tok)
		if !ok || c.Name != "shop" {
			t.Fatalf("%s: %+v %v", tok, c, ok)
		}
		for id, want := range map[string]bool{"shop-1": true, "shop-": true, "vip:42": true, "vip:43": false, "shoP-1": false, "alice": false} {
			if c.Scope.Allows(id) != want {
				t.Errorf("shop scope %s allows %q = %v", c.Scope, id, !want)
			}
		}
	}
	c, ok := authenticate(t, s, "support-token-0123456789")
	if !ok || !c.Scope.Allows("anyone") || c.Scope.Implicit() {
		t.Fatalf("support: %+v %v", c, ok)
	}
	if _, ok := authenticate(t, s, "nope-nope-nope-nope-0"); ok {
		t.Fatal("unknown token admitted")
	}
}

// A bare name:token is every user only while it is the only client.
func TestBareTokenIsEveryUserOnlyWhenAlone(t *testing.T) {
	t.Parallel()
	s, err := Parse("dev:dev-api-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := authenticate(t, s, "dev-api-token-0123456789")
	if !ok || !c.Scope.Allows("anyone") || !c.Scope.Implicit() {
		t.Fatalf("lone bare client: %+v %v", c, ok)
	}
	_, err = Parse("dev:dev-api-token-0123456789,other(o-*):other-token-0123456789")
	if err == nil || !strings.Contains(err.Error(), `client "dev" has no scope`) {
		t.Fatalf("a bare client beside another must be refused, got %v", err)
	}
}

func TestParseErrorsNameTheEntryNotTheToken(t *testing.T) {
	t.Parallel()
	const secret = "very-secret-token-0123456789"
	for _, spec := range []string{
		"shop",
		"shop(:" + secret,
		"shop()" + ":" + secret,
		"shop(a*b):" + secret,
		"shop(a)(b):" + secret,
		"shop(a):" + secret + ",shop(b):other-token-0123456789",
		"shop(" + strings.Repeat("x", 200) + "):" + secret,
		"shop(a):short",
		"a(x):" + secret + ",b(y):" + secret,
		"(x):" + secret,
	} {
		_, err := Parse(spec)
		if err == nil {
			t.Errorf("Parse(%q) must fail", spec)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows the token", err)
		}
	}
}
