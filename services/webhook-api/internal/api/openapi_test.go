package api_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/openapitest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/api"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/clients"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
)

// TestOpenAPIMatchesTheRouter: the router as run.go mounts it routes
// exactly ../../openapi.yaml's operations, and each documents the statuses
// it can answer.
func TestOpenAPIMatchesTheRouter(t *testing.T) {
	t.Parallel()
	documented := openapitest.Documented(t, "../../openapi.yaml")
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	set, err := clients.Parse("")
	require.NoError(t, err)
	r := httpserver.NewRouter(logger, httpserver.NewRegistry())
	api.Mount(r, api.Deps{Logger: logger, Clients: set, Stripe: verify.NewStripe(nil), Paystack: verify.NewPaystack("")})
	openapitest.RequireRoutes(t, r, documented, nil)

	for route, op := range documented {
		method, path, _ := strings.Cut(route, " ")
		if strings.HasPrefix(path, "/webhooks/") {
			openapitest.RequireStatuses(t, route, op, "200", "400", "401", "413", "503")
			continue
		}
		openapitest.RequireStatuses(t, route, op, "401", "403", "503")
		if method == http.MethodPost && !strings.HasSuffix(path, "/disable") {
			openapitest.RequireStatuses(t, route, op, "400", "413")
		}
		if strings.Contains(path, "{id}") || strings.Contains(path, "{destination_id}") || strings.HasPrefix(path, "/v1/wallets/") {
			openapitest.RequireStatuses(t, route, op, "404")
		}
		if path == "/v1/payouts" {
			openapitest.RequireStatuses(t, route, op, "422")
		}
	}
}
