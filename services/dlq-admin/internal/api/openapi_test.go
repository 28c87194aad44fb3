package api_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/openapitest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/api"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ui"
)

// TestOpenAPIMatchesTheRouter walks the service's router and checks that
// its routes are exactly the document's, and that every operation documents
// the statuses docs/design/contract.md promises.
func TestOpenAPIMatchesTheRouter(t *testing.T) {
	t.Parallel()
	documented := openapitest.Documented(t, "../../openapi.yaml")

	// The router as run.go builds it; operational and UI routes are not
	// part of the API.
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	tokens, err := bearer.Parse("", api.Roles())
	require.NoError(t, err)
	r := httpserver.NewRouter(logger, httpserver.NewRegistry())
	api.Mount(r, api.Deps{Logger: logger, Tokens: tokens})
	require.NoError(t, ui.Mount(r))
	openapitest.RequireRoutes(t, r, documented, func(route string) bool { return route == "" || strings.HasPrefix(route, "/ui/") })

	for route, op := range documented {
		method, path, _ := strings.Cut(route, " ")
		want := []string{"401"}
		if method == http.MethodPost {
			want = append(want, "403")
		}
		if strings.Contains(path, "{id}") {
			want = append(want, "400", "404")
		}
		if strings.HasSuffix(path, "/{id}/replay") || strings.HasSuffix(path, "/{id}/discard") {
			want = append(want, "409")
		}
		if strings.HasSuffix(path, "/{id}/replay") {
			want = append(want, "422")
		}
		if path == "/v1/reconciliation" && method == http.MethodGet {
			want = append(want, "404")
		}
		openapitest.RequireStatuses(t, route, op, want...)
	}
}
