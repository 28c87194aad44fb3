package clients

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/event"
)

// Client is an authenticated API client.
type Client struct {
	Name  string
	Scope Scope
}

// Scope is the set of user ids a client may act for.
type Scope struct {
	all      bool
	exact    map[string]bool
	prefixes []string
	// implicit is set for the lone bare client (every user, unstated).
	implicit bool
}

// Allows reports whether the scope covers userID.
func (s Scope) Allows(userID string) bool {
	if s.all {
		return true
	}
	if s.exact[userID] {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(userID, p) {
			return true
		}
	}
	return false
}

// String is the scope as API_TOKENS writes it.
func (s Scope) String() string {
	if s.all {
		return "*"
	}
	var parts []string
	for id := range s.exact {
		parts = append(parts, id)
	}
	for _, p := range s.prefixes {
		parts = append(parts, p+"*")
	}
	sort.Strings(parts)
	return strings.Join(parts, "|")
}

// Implicit reports whether the scope is "every user" only because the
// client is the only one and states none.
func (s Scope) Implicit() bool { return s.implicit }

// Set is the configured clients.
type Set struct {
	tokens  *bearer.Set
	clients map[string]Client
}

// Parse reads API_TOKENS (see the package doc). Errors name the entry or the
// client, never a token.
func Parse(spec string) (*Set, error) {
	var creds []bearer.Credential
	scopes := map[string]string{} // client → its scope as written, "" for none
	var order []string
	for i, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		head, secret, ok := cutOutsideParens(item)
		if !ok || secret == "" {
			return nil, fmt.Errorf("entry %d: want client:token or client(scope):token", i+1)
		}
		name, scope, err := splitScope(head)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		prev, seen := scopes[name]
		switch {
		case !seen:
			order = append(order, name)
			scopes[name] = scope
		case scope != "" && prev != "" && scope != prev:
			return nil, fmt.Errorf("client %q: two different scopes (%s and %s); write one, on any of its entries", name, prev, scope)
		case scope != "":
			scopes[name] = scope
		}
		creds = append(creds, bearer.Credential{Name: name, Secret: secret})
	}
	tokens, err := bearer.New(creds)
	if err != nil {
		return nil, err
	}
	s := &Set{tokens: tokens, clients: map[string]Client{}}
	for _, name := range order {
		var sc Scope
		switch {
		case scopes[name] != "":
			if sc, err = parseScope(scopes[name]); err != nil {
				return nil, fmt.Errorf("client %q: %w", name, err)
			}
		case len(order) == 1:
			sc = Scope{all: true, implicit: true}
		default:
			return nil, fmt.Errorf("client %q has no scope: with several clients each names the users it acts for, "+
				"for example %s(%s-*):<token>, or %s(*):<token> for every user", name, name, name, name)
		}
		s.clients[name] = Client{Name: name, Scope: sc}
	}
	return s, nil
}

// cutOutsideParens splits item at its first ':' that is not inside the
// scope's parentheses (user ids may contain ':').
func cutOutsideParens(item string) (head, tail string, ok bool) {
	depth := 0
	for i, r := range item {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ':':
			if depth == 0 {
				return item[:i], item[i+1:], true
			}
		}
	}
	return "", "", false
}

// splitScope splits "name(scope)" into its parts; "name" has scope "".
func splitScope(head string) (name, scope string, err error) {
	name, rest, hasScope := strings.Cut(head, "(")
	name = strings.TrimSpace(name)
	if name == "" || strings.ContainsAny(name, ")*|") {
		return "", "", fmt.Errorf("client name %q: want a name without ( ) * |", name)
	}
	if !hasScope {
		return name, "", nil
	}
	scope, ok := strings.CutSuffix(strings.TrimSpace(rest), ")")
	if !ok || strings.ContainsAny(scope, "()") {
		return "", "", fmt.Errorf("client %q: the scope must be one (…) right after the name", name)
	}
	if strings.TrimSpace(scope) == "" {
		return "", "", fmt.Errorf("client %q: empty scope; write (*) for every user", name)
	}
	return name, scope, nil
}

// parseScope reads "id|prefix*|*".
func parseScope(spec string) (Scope, error) {
	s := Scope{exact: map[string]bool{}}
	for _, p := range strings.Split(spec, "|") {
		p = strings.TrimSpace(p)
		switch {
		case p == "*":
			s.all = true
		case p == "" || len(p) > event.MaxUserID:
			return Scope{}, fmt.Errorf("scope entry %q: want a user id, a prefix ending in * or *, at most %d bytes", p, event.MaxUserID)
		case strings.Contains(strings.TrimSuffix(p, "*"), "*"):
			return Scope{}, fmt.Errorf("scope entry %q: * may only end a prefix", p)
		case strings.HasSuffix(p, "*"):
			s.prefixes = append(s.prefixes, strings.TrimSuffix(p, "*"))
		default:
			s.exact[p] = true
		}
	}
	sort.Strings(s.prefixes)
	return s, nil
}

// Len is the number of clients.
func (s *Set) Len() int { return len(s.clients) }

// Clients lists the configured clients by name.
func (s *Set) Clients() []Client {
	out := make([]Client, 0, len(s.clients))
	for _, c := range s.clients {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

type clientKey struct{}

// Middleware admits requests with a configured token and puts their Client
// on the context (FromContext); refuse answers every other request.
func (s *Set) Middleware(refuse http.HandlerFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, ok := s.tokens.Authenticate(r)
			c, known := s.clients[tok.Name]
			if !ok || !known {
				refuse(w, r)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientKey{}, c)))
		})
	}
}

// FromContext returns the client Middleware authenticated.
func FromContext(ctx context.Context) (Client, bool) {
	c, ok := ctx.Value(clientKey{}).(Client)
	return c, ok
}
