package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/chaos"
)

// TestChaosShort is the shortened chaos run of `make test`: the whole suite
// (race-built) for a minute under every kind of fault, then the invariants.
// CHAOS_SEED picks the seed (default 1); `make chaos` runs the long profile.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run skipped with -short")
	}
	seed := uint64(1)
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
		seed = n
	}
	bin := binaries(t)
	profile, err := chaos.ProfileNamed("short")
	if err != nil {
		t.Fatal(err)
	}
	logs, err := os.Create(filepath.Join(t.TempDir(), "chaos.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	rep, err := chaos.Run(context.Background(), chaos.Config{BinDir: bin, AdminURL: pgtest.AdminURL(),
		Profile: profile, Seed: seed, Logs: logs, Progress: testWriter{t}})
	if err != nil {
		t.Fatalf("chaos run (seed %d): %v", seed, err)
	}
	t.Log(rep)
	if !rep.OK() {
		t.Fatalf("chaos run with seed %d broke %d invariants (process logs: %s)", seed, len(rep.Violations), logs.Name())
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
