package stack

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/proctest"
)

// A service that exits before it is ready (Postgres too slow or out of
// connection slots, on a shared machine) is started again, as a process
// manager would, and the stack says so; one that keeps exiting fails the
// start with its exit.
func TestAServiceThatExitsDuringStartupIsStartedAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "readyz"), []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The service exits with status 1 on its first FAILS starts, then
	// serves dir (GET /readyz answers 200).
	script := filepath.Join(dir, "svc.sh")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
n=$(cat "$COUNT" 2>/dev/null || echo 0)
echo $((n + 1)) > "$COUNT"
if [ "$n" -lt "$FAILS" ]; then echo "too many clients" >&2; exit 1; fi
cd "$DIR" && exec python3 -m http.server "$PORT" --bind 127.0.0.1
`), 0o700); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, fails int) (string, error) {
		port := proctest.FreePort(t)
		var out bytes.Buffer
		s := New(Config{}, &out)
		t.Cleanup(func() { _ = s.Stop(5 * time.Second) })
		env := map[string]string{"COUNT": filepath.Join(t.TempDir(), "count"), "FAILS": strconv.Itoa(fails), "DIR": dir, "PORT": strconv.Itoa(port)}
		if err := s.LaunchPath("svc", script, env); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := s.waitReady(ctx, []waitFor{{"svc", URL(port) + "/readyz"}})
		s.out.mu.Lock() // the process may still be writing
		defer s.out.mu.Unlock()
		return out.String(), err
	}
	t.Run("exits twice, ready on the third start", func(t *testing.T) {
		t.Parallel()
		out, err := run(t, startAttempts-1)
		if err != nil {
			t.Fatalf("not ready: %v\n%s", err, out)
		}
		if n := strings.Count(out, "svc exited during startup (exit status 1); starting it again"); n != startAttempts-1 {
			t.Errorf("%d restarts said, want %d:\n%s", n, startAttempts-1, out)
		}
	})
	t.Run("exits every time", func(t *testing.T) {
		t.Parallel()
		out, err := run(t, startAttempts)
		if err == nil || !strings.Contains(err.Error(), "svc exited during startup: exit status 1") {
			t.Fatalf("err = %v, want svc's exit\n%s", err, out)
		}
	})
}
