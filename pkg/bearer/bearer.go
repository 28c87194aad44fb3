package bearer

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Token is one configured credential.
type Token struct {
	Name string
	Role string
	hash [32]byte
}

// Set is the configured tokens.
type Set struct {
	tokens []Token
}

// Credential is one configured token before it is hashed.
type Credential struct {
	Name   string
	Role   string
	Secret string
}

// New returns the Set of creds. A name may come with several secrets
// (rotation: the old and the new token both work while clients move over),
// always with one role; a secret may belong to one name only, and is at
// least 16 characters long. Errors name the credential, never its secret.
func New(creds []Credential) (*Set, error) {
	s := &Set{}
	roleOf := map[string]string{}
	secrets := map[[32]byte]bool{}
	for _, c := range creds {
		if c.Name == "" {
			return nil, errors.New("token without a name")
		}
		if len(c.Secret) < 16 {
			return nil, fmt.Errorf("token %q: secret must be at least 16 characters", c.Name)
		}
		if role, ok := roleOf[c.Name]; ok && role != c.Role {
			return nil, fmt.Errorf("token name %q used with two roles (%q and %q)", c.Name, role, c.Role)
		}
		roleOf[c.Name] = c.Role
		h := sha256.Sum256([]byte(c.Secret))
		if secrets[h] {
			return nil, fmt.Errorf("token %q: the same secret is configured twice", c.Name)
		}
		secrets[h] = true
		s.tokens = append(s.tokens, Token{Name: c.Name, Role: c.Role, hash: h})
	}
	return s, nil
}

// Parse reads "name:token,…" (roles == nil) or "name:role:token,…" with role
// one of roles. Empty spec yields an empty Set, which refuses everyone. A
// name listed twice with two secrets is one client whose tokens both work.
func Parse(spec string, roles []string) (*Set, error) {
	var creds []Credential
	for i, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		want := 2
		if roles != nil {
			want = 3
		}
		parts := strings.SplitN(item, ":", want)
		if len(parts) != want || parts[0] == "" || parts[want-1] == "" {
			if roles != nil {
				return nil, fmt.Errorf("token %d: want name:role:token", i+1)
			}
			return nil, fmt.Errorf("token %d: want name:token", i+1)
		}
		c := Credential{Name: parts[0], Secret: parts[want-1]}
		if roles != nil {
			c.Role = parts[1]
			if !contains(roles, c.Role) {
				return nil, fmt.Errorf("token %q: role %q, want one of %s", c.Name, c.Role, strings.Join(roles, ", "))
			}
		}
		creds = append(creds, c)
	}
	return New(creds)
}

// Names lists the configured token names, each once, in the order first
// configured.
func (s *Set) Names() []string {
	var out []string
	for _, t := range s.tokens {
		if !contains(out, t.Name) {
			out = append(out, t.Name)
		}
	}
	return out
}

// Len is the number of configured tokens.
func (s *Set) Len() int { return len(s.tokens) }

// Authenticate returns the token presented in r's Authorization header.
func (s *Set) Authenticate(r *http.Request) (Token, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return Token{}, false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):])))
	var match Token
	found := 0
	for _, t := range s.tokens {
		// Every token is compared; no early exit.
		eq := subtle.ConstantTimeCompare(got[:], t.hash[:])
		if eq == 1 {
			match = t
		}
		found |= eq
	}
	return match, found == 1
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

type tokenKey struct{}

// Middleware admits requests that present a configured token and puts the
// token on their context (FromContext); every other request is answered by
// refuse, which writes the service's 401.
func (s *Set) Middleware(refuse http.HandlerFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, ok := s.Authenticate(r)
			if !ok {
				refuse(w, r)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok)))
		})
	}
}

// FromContext returns the token Middleware authenticated.
func FromContext(ctx context.Context) (Token, bool) {
	tok, ok := ctx.Value(tokenKey{}).(Token)
	return tok, ok
}
