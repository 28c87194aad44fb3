package proctest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build compiles the main package at importPath (resolved through the
// workspace) into dir and returns the binary's path. Go's build cache makes
// repeated builds cheap. race builds it with the race detector. Under -short
// it skips t (Heavy).
func Build(t testing.TB, dir, importPath string, race bool) string {
	t.Helper()
	Heavy(t, "builds "+filepath.Base(importPath))
	if err := BuildAll(dir, race, importPath); err != nil {
		t.Fatalf("proctest: %v", err)
	}
	return filepath.Join(dir, filepath.Base(importPath))
}

// BuildAll compiles the main packages at importPaths into dir with one go
// build, each binary named after the last element of its import path. One
// invocation compiles what the binaries share once and links them in
// parallel; Go's build cache keeps compiled packages, but every build links
// again, and a race-built service takes seconds to link. A package's
// TestMain can build what its tests run once instead of once per test.
func BuildAll(dir string, race bool, importPaths ...string) error {
	if len(importPaths) == 0 {
		return nil
	}
	// A trailing separator makes go build write every binary into dir.
	args := []string{"build", "-o", filepath.Clean(dir) + string(filepath.Separator)}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, importPaths...)...)
	cmd.Env = os.Environ()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(importPaths, " "), err, b)
	}
	return nil
}

// FreePort returns a loopback port nothing listens on right now (Port),
// failing the test when there is none.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := Port()
	if err != nil {
		t.Fatalf("proctest: free port: %v", err)
	}
	return port
}

// Port returns a loopback port nothing listens on right now, for a process
// that binds it a moment later. It is picked below the kernel's ephemeral
// range: a port from that range (what listening on :0 hands out) may be
// taken by any outgoing connection in between, and a service then fails to
// start with "address already in use" (a chaos seed did, 2026-11-23).
// Where the range leaves no room below it, :0 it is.
func Port() (int, error) {
	lo := ephemeralLow()
	if lo > portsFrom+1000 {
		for range 100 {
			port := portsFrom + rand.IntN(lo-portsFrom)
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				continue // taken: try another
			}
			if err := ln.Close(); err != nil {
				return 0, fmt.Errorf("close probe listener: %w", err)
			}
			return port, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen on a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Ports returns n distinct loopback ports nothing listens on right now: each
// is held while the next is picked, so that Port cannot hand one out twice
// (it probes, then lets go). A stack's ports come from one call.
func Ports(n int) ([]int, error) {
	out := make([]int, 0, n)
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close() // a probe: only freeing the port matters
		}
	}()
	for len(out) < n {
		port, err := Port()
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // taken in between: pick another
		}
		held = append(held, ln)
		out = append(out, port)
	}
	return out, nil
}

// FreePorts is Ports, failing the test when there are none.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := Ports(n)
	if err != nil {
		t.Fatalf("proctest: free ports: %v", err)
	}
	return ports
}

// portsFrom is the lowest port Port picks: above the well-known and the
// usual fixed ports of local servers (Postgres 5432, Redis 6379, make dev's
// 808x and 9092).
const portsFrom = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range), or 0 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	lo, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return lo
}

// Proc is a running binary.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu    sync.Mutex
	lines []string
}

// Start runs bin with env (added to a minimal environment) and streams its
// output into the test log prefixed with name. The process is stopped with
// SIGTERM when t ends.
func Start(t testing.TB, name, bin string, env map[string]string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("proctest: start %s: %v", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		// The exit status says nothing at cleanup (a test may have crashed
		// the process on purpose); a process that will not stop still fails t.
		_ = p.Stop(t, 20*time.Second)
		if t.Failed() || os.Getenv("PROCTEST_LOGS") != "" {
			t.Logf("--- %s output ---\n%s", name, strings.Join(p.Lines(), "\n"))
		}
	})
	return p
}

// Lines returns what the process printed so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// Stop sends SIGTERM and waits up to grace, then kills. It reports the exit
// error (nil for a clean exit).
func (p *Proc) Stop(t testing.TB, grace time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		t.Errorf("proctest: %s did not stop within %s of SIGTERM; killing it", p.Name, grace)
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return p.err
	}
}

// Kill sends SIGKILL (a crash) and waits for the process to go.
func (p *Proc) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Signal sends sig to the process group, for example SIGSTOP to freeze a
// process with its connections still open.
func (p *Proc) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitHTTP waits until GET url answers 200, or fails the test.
func WaitHTTP(t testing.TB, url string, timeout time.Duration, procs ...*Proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		for _, p := range procs {
			if p.Exited() {
				t.Fatalf("proctest: %s exited while waiting for %s:\n%s", p.Name, url, strings.Join(p.Lines(), "\n"))
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("proctest: %s not ready after %s (last error: %v)", url, timeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addr formats a loopback address.
func Addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
