package api_test

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/api"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ui"
)

// openAPIPath is the document beside the service.
const openAPIPath = "../../openapi.yaml"

type openAPIDoc struct {
	OpenAPI string                                 `yaml:"openapi"`
	Paths   map[string]map[string]openAPIOperation `yaml:"paths"`
}

type openAPIOperation struct {
	Responses map[string]any `yaml:"responses"`
}

// TestOpenAPIMatchesTheRouter walks the service's router and checks that
// its routes are exactly the document's, and that every operation documents
// the statuses CONTRACT.md promises.
func TestOpenAPIMatchesTheRouter(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(openAPIPath)
	require.NoError(t, err)
	var doc openAPIDoc
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3.0"), "OpenAPI 3.0, got %q", doc.OpenAPI)

	documented := map[string]openAPIOperation{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			switch method {
			case "get", "post", "put", "patch", "delete":
				documented[strings.ToUpper(method)+" "+path] = op
			}
		}
	}

	// The router as run.go builds it; operational and UI routes are not
	// part of the API.
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	tokens, err := bearer.Parse("", api.Roles())
	require.NoError(t, err)
	r := httpserver.NewRouter(logger, httpserver.NewRegistry())
	api.Mount(r, api.Deps{Logger: logger, Tokens: tokens})
	require.NoError(t, ui.Mount(r))
	routed := map[string]bool{}
	err = chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(route, "/")
		switch {
		case route == "" || route == "/healthz" || route == "/readyz" || route == "/metrics" || strings.HasPrefix(route, "/ui/"):
			return nil
		}
		routed[method+" "+route] = true
		return nil
	})
	require.NoError(t, err)

	require.Equal(t, keys(documented), keys(routed), "router and openapi.yaml must list the same routes")

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
		for _, status := range want {
			require.Contains(t, op.Responses, status, "%s documents %s", route, status)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
