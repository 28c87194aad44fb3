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

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/api"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/clients"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
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

// TestOpenAPIMatchesTheRouter walks the router as run.go mounts it and
// checks that its routes are exactly the document's, and that every
// operation documents the statuses the API can answer.
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

	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	set, err := clients.Parse("")
	require.NoError(t, err)
	r := httpserver.NewRouter(logger, httpserver.NewRegistry())
	api.Mount(r, api.Deps{Logger: logger, Clients: set, Stripe: verify.NewStripe(nil), Paystack: verify.NewPaystack("")})
	routed := map[string]bool{}
	err = chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(route, "/")
		if route == "/healthz" || route == "/readyz" || route == "/metrics" {
			return nil
		}
		routed[method+" "+route] = true
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, keys(documented), keys(routed), "router and openapi.yaml must list the same routes")

	for route, op := range documented {
		method, path, _ := strings.Cut(route, " ")
		var want []string
		switch {
		case strings.HasPrefix(path, "/webhooks/"):
			want = []string{"200", "400", "401", "413", "503"}
		default:
			want = []string{"401", "403", "503"}
			if method == http.MethodPost && !strings.HasSuffix(path, "/disable") {
				want = append(want, "400", "413")
			}
			if strings.Contains(path, "{id}") || strings.Contains(path, "{destination_id}") || strings.HasPrefix(path, "/v1/wallets/") {
				want = append(want, "404")
			}
			if path == "/v1/payouts" {
				want = append(want, "422")
			}
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
