package api

import (
	"context"
	"net/http"

	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/redact"
)

// Roles of DLQ_ADMIN_TOKENS.
const (
	// RoleViewer reads dead letters and stats.
	RoleViewer = "viewer"
	// RoleOperator also replays and discards.
	RoleOperator = "operator"
)

// Roles lists the roles DLQ_ADMIN_TOKENS may name, for bearer.Parse.
func Roles() []string { return []string{RoleViewer, RoleOperator} }

// permits reports whether a token of role may do what needs requires.
func permits(role, needs string) bool {
	switch needs {
	case RoleViewer:
		return role == RoleViewer || role == RoleOperator
	case RoleOperator:
		return role == RoleOperator
	default:
		return false
	}
}

// authenticate refuses requests without a configured token (401) and puts
// the token on the context for requireRole and for the audit log's actor.
func (a *api) authenticate(next http.Handler) http.Handler {
	return a.Tokens.Middleware(func(w http.ResponseWriter, r *http.Request) { a.fail(w, r, errUnauthorized) })(next)
}

// requireRole answers 403 unless the request's token has a role that permits
// needs. It runs after authenticate; a request that somehow skipped it has
// no token and is refused.
func (a *api) requireRole(needs string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, ok := tokenFrom(r.Context())
			if !ok {
				a.fail(w, r, errUnauthorized)
				return
			}
			if !permits(tok.Role, needs) {
				a.fail(w, r, errForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// readerLevel is what the request's token may see of a payload: operators
// the stored payload (credentials and card data hidden), everyone else
// personal data hidden as well.
func readerLevel(r *http.Request) redact.Level {
	if tok, ok := tokenFrom(r.Context()); ok && tok.Role == RoleOperator {
		return redact.Secrets
	}
	return redact.Personal
}

// tokenFrom returns the authenticated token; its Name is the actor of
// operator actions.
func tokenFrom(ctx context.Context) (bearer.Token, bool) { return bearer.FromContext(ctx) }
