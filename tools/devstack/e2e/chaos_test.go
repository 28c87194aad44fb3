package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/chaos"
)

// TestChaosShort is the shortened chaos run of `make test`: the whole suite
// (race-built) for a minute under every kind of fault, then the invariants.
// CHAOS_SEED picks the seed (default 1); `make chaos` runs the long profile.
func TestChaosShort(t *testing.T) {
	proctest.Heavy(t, "a chaos run")
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
	// The process logs outlive the test (a package timeout would delete a
	// t.TempDir with them), and a failure prints their tail, so a run in CI
	// can be diagnosed from its output alone.
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("aegis-chaos-short-seed%d-%d.log", seed, os.Getpid()))
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- last lines of the process logs (%s) ---\n%s", logPath, tail(logPath, 400))
			return
		}
		_ = os.Remove(logPath)
	})
	// End the run before the package's timeout would kill the test binary
	// and every report with it.
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-2*time.Minute))
		defer cancel()
	}
	rep, err := chaos.Run(ctx, chaos.Config{BinDir: bin, AdminURL: pgtest.AdminURL(),
		Profile: profile, Seed: seed, Logs: logs, Progress: testWriter{t}})
	if err != nil {
		t.Fatalf("chaos run (seed %d): %v", seed, err)
	}
	t.Log(rep)
	if !rep.OK() {
		t.Fatalf("chaos run with seed %d broke %d invariants", seed, len(rep.Violations))
	}
}

// tail is the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
