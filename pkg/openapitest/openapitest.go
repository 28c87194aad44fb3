package openapitest

import (
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.yaml.in/yaml/v3"
)

// Operation is what the tests read of an OpenAPI operation.
type Operation struct {
	Responses map[string]any `yaml:"responses"`
}

type document struct {
	OpenAPI string                          `yaml:"openapi"`
	Paths   map[string]map[string]Operation `yaml:"paths"`
}

// Documented reads the OpenAPI 3.0 document at path and returns its
// operations keyed "METHOD /path".
func Documented(t testing.TB, path string) map[string]Operation {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var doc document
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0") {
		t.Fatalf("%s: want OpenAPI 3.0, got %q", path, doc.OpenAPI)
	}
	out := map[string]Operation{}
	for p, ops := range doc.Paths {
		for method, op := range ops {
			switch method {
			case "get", "post", "put", "patch", "delete":
				out[strings.ToUpper(method)+" "+p] = op
			}
		}
	}
	return out
}

// RequireRoutes fails unless r routes exactly the documented operations.
// The operational endpoints (/healthz, /readyz, /metrics) and the routes
// skip reports are not part of the API.
func RequireRoutes(t testing.TB, r chi.Router, documented map[string]Operation, skip func(route string) bool) {
	t.Helper()
	var routed []string
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(route, "/")
		switch {
		case route == "/healthz" || route == "/readyz" || route == "/metrics":
		case skip != nil && skip(route):
		default:
			routed = append(routed, method+" "+route)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the router: %v", err)
	}
	var doc []string
	for k := range documented {
		doc = append(doc, k)
	}
	sort.Strings(routed)
	sort.Strings(doc)
	if strings.Join(routed, "\n") != strings.Join(doc, "\n") {
		t.Fatalf("router and OpenAPI document must list the same routes\nrouted:\n  %s\ndocumented:\n  %s",
			strings.Join(routed, "\n  "), strings.Join(doc, "\n  "))
	}
}

// RequireStatuses fails unless op, the operation route ("METHOD /path"),
// documents every status in want.
func RequireStatuses(t testing.TB, route string, op Operation, want ...string) {
	t.Helper()
	for _, status := range want {
		if _, ok := op.Responses[status]; !ok {
			t.Errorf("%s does not document %s", route, status)
		}
	}
}
