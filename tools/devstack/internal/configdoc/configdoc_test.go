package configdoc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReferenceIsCurrent fails when docs/reference/configuration.md is not
// what the readers say: a variable added, removed, renamed, given another
// default or meaning without `make generate`.
func TestReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	dir := root(t)
	want, err := Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(OutPath)))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is stale: run make generate (or go run ./tools/devstack/cmd/aegis-configdoc from the root)", OutPath)
	}
}

// TestCollectFindsTheReaders checks the collector against variables whose
// readers, defaults and services are known, including a default that is a
// reader's parameter, a name that is a constant, a getenv read, a
// variable reached through pkg/ and the planted defect left out.
func TestCollectFindsTheReaders(t *testing.T) {
	t.Parallel()
	vars, err := Collect(root(t))
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Variable{}
	for _, v := range vars {
		by[v.Name] = v
	}
	for _, c := range []struct {
		name, service, def string
		services           []string
	}{
		{"RELAY_WORKERS", "outbox-relay", "`2`", []string{"outbox-relay"}},
		{"RELAY_POLL_INTERVAL", "outbox-relay", "`500ms`", nil},
		{"PSP_IDEMPOTENCY_WINDOW", "payout-worker", "`23h`", nil},
		{"HTTP_ADDR", "outbox-relay", "`:8081`", []string{"dlq-admin", "outbox-relay", "payout-worker", "webhook-api"}},
		{"HTTP_ADDR", "webhook-api", "`:8080`", nil},
		{"DB_MAX_CONNS", "payout-worker", "`24`", []string{"payout-worker", "webhook-api"}},
		{"AEGIS_EVENT_SIGNING_KEY", "webhook-api", "none", []string{"payout-worker", "webhook-api"}},
		{"GOGC", "webhook-api", "none", []string{"webhook-api"}},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "dlq-admin", "none", nil},
		{"ALERT_WEBHOOK_URL", "payout-worker", "none", []string{"dlq-admin", "outbox-relay", "payout-worker"}},
		{"PSP_RECONCILE_INTERVAL", "webhook-api", "`15m`", []string{"payout-worker", "webhook-api"}},
	} {
		v, ok := by[c.name]
		if !ok {
			t.Errorf("%s not found", c.name)
			continue
		}
		if got := v.Defaults[c.service]; got != c.def {
			t.Errorf("%s default in %s = %q, want %q", c.name, c.service, got, c.def)
		}
		if c.services != nil && !slices.Equal(v.Services, c.services) {
			t.Errorf("%s read by %v, want %v", c.name, v.Services, c.services)
		}
		if strings.TrimSpace(v.Meaning) == "" {
			t.Errorf("%s has no meaning", c.name)
		}
	}
	for name := range by {
		if strings.Contains(name, "PLANT") {
			t.Errorf("%s is listed: planted defects are switched in chaos builds only, not configuration", name)
		}
	}
	if len(vars) < 90 {
		t.Errorf("only %d variables found", len(vars))
	}
}

func TestDocTable(t *testing.T) {
	t.Parallel()
	src := `package x

// f reads:
//
//	A_ONE    first
//	         and more
//	B_TWO    second
//
// Not a table: C_THREE  prose.
func f() {}
`
	vars := parseDoc(t, src)
	if vars["A_ONE"] != "first and more" || vars["B_TWO"] != "second" || len(vars) != 2 {
		t.Fatalf("docTable = %v", vars)
	}
}
