package e2e

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/aegis-payments/aegis/pkg/proctest"
)

// The binaries every test of the package runs are built once per test
// binary: each test used to build (and so link) all six again, seconds per
// race-built service, and the stacks they start stay each test's own.
var (
	// raceBuilt are the suite's services, built with the race detector.
	raceBuilt = []string{"webhook-api", "outbox-relay", "payout-worker", "dlq-admin"}
	// plainBuilt are the stand-ins, built without it.
	plainBuilt = []string{"aegis-kafka", "aegis-psp"}
)

// bins is the directory of the package's binaries: made by TestMain,
// filled by the first test that needs it. A failed build fails that test
// and every later one that asks.
type bins struct {
	dir  string
	once sync.Once
	err  error
}

// shared is set by TestMain before any test runs.
var shared *bins

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "aegis-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: binaries directory:", err)
		os.Exit(2)
	}
	shared = &bins{dir: dir}
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: remove binaries:", err)
	}
	os.Exit(code)
}

// binaries returns the directory holding the four race-built services,
// aegis-kafka and aegis-psp, building them on first use.
func binaries(t *testing.T) string {
	t.Helper()
	proctest.Heavy(t, "runs the suite's binaries")
	b := shared
	b.once.Do(func() {
		var wg sync.WaitGroup
		var raceErr, plainErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			raceErr = proctest.BuildAll(b.dir, true, importPaths("services/", raceBuilt)...)
		}()
		go func() {
			defer wg.Done()
			plainErr = proctest.BuildAll(b.dir, false, importPaths("tools/devstack/cmd/", plainBuilt)...)
		}()
		wg.Wait()
		b.err = errors.Join(raceErr, plainErr)
	})
	if b.err != nil {
		t.Fatalf("build the suite's binaries: %v", b.err)
	}
	return b.dir
}

func importPaths(under string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = module + under + n
	}
	return out
}
