package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/bearer"
)

// The guard every write route sits behind (api_write_test.go checks the
// routes themselves).
func TestRequireOperatorRefusesViewers(t *testing.T) {
	t.Parallel()
	tokens, err := bearer.Parse("alice:viewer:viewer-token-0123456789,bob:operator:operator-token-0123456789", Roles())
	require.NoError(t, err)
	a := &api{Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Tokens: tokens}}
	r := chi.NewRouter()
	r.With(a.authenticate, a.requireRole(RoleOperator)).Post("/write", func(w http.ResponseWriter, r *http.Request) {
		tok, ok := tokenFrom(r.Context())
		require.True(t, ok)
		_, _ = io.WriteString(w, tok.Name)
	})

	cases := []struct {
		token  string
		status int
		body   string
	}{
		{"", http.StatusUnauthorized, `"unauthorized"`},
		{"viewer-token-0123456789", http.StatusForbidden, `"forbidden"`},
		{"operator-token-0123456789", http.StatusOK, "bob"},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(http.MethodPost, "/write", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		require.Equal(t, tc.status, rec.Code, tc.token)
		require.Contains(t, rec.Body.String(), tc.body)
	}
}

func TestPermits(t *testing.T) {
	t.Parallel()
	require.True(t, permits(RoleViewer, RoleViewer))
	require.True(t, permits(RoleOperator, RoleViewer))
	require.True(t, permits(RoleOperator, RoleOperator))
	require.False(t, permits(RoleViewer, RoleOperator))
	require.False(t, permits("", RoleViewer))
	require.False(t, permits(RoleOperator, "admin"))
}
