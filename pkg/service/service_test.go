package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/buildinfo"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/memlimit"
)

func TestReadBase(t *testing.T) {
	t.Parallel()
	env := config.New(func(k string) string {
		return map[string]string{"HTTP_ADDR": "nonsense", "LOG_LEVEL": "loud", "SHUTDOWN_GRACE": "-1s", "ADMIN_ADDR": "nowhere", "SHUTDOWN_DRAIN": "-1s"}[k]
	})
	b := ReadBase(env, "x", ":8080")
	err := env.Err()
	if err == nil {
		t.Fatal("bad values must be reported")
	}
	for _, want := range []string{"HTTP_ADDR", "LOG_LEVEL", "SHUTDOWN_GRACE", "ADMIN_ADDR", "SHUTDOWN_DRAIN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if b.DatabaseURL != DefaultDatabaseURL {
		t.Errorf("DATABASE_URL default = %q", b.DatabaseURL)
	}
	// The drain is part of the grace.
	env = config.New(func(k string) string {
		return map[string]string{"SHUTDOWN_GRACE": "10s", "SHUTDOWN_DRAIN": "10s"}[k]
	})
	ReadBase(env, "x", ":8080")
	if err := env.Err(); err == nil || !strings.Contains(err.Error(), "SHUTDOWN_DRAIN") {
		t.Errorf("a drain as long as the grace must be refused, got %v", err)
	}
	env = config.New(func(k string) string { return map[string]string{"SHUTDOWN_DRAIN": "3s"}[k] })
	if b := ReadBase(env, "x", ":8080"); env.Err() != nil || b.ShutdownDrain != 3*time.Second {
		t.Errorf("SHUTDOWN_DRAIN 3s: %v, %v", b.ShutdownDrain, env.Err())
	}
}

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	getenv := func(k string) string {
		if k == "HTTP_ADDR" {
			return ":" + port
		}
		return ""
	}
	if err := Healthcheck(context.Background(), getenv); err != nil {
		t.Fatalf("ready service: %v", err)
	}
	ready = false
	if err := Healthcheck(context.Background(), getenv); err == nil {
		t.Fatal("a 503 from /readyz must fail the healthcheck")
	}
	if err := Healthcheck(context.Background(), func(string) string { return "" }); err == nil {
		t.Fatal("no HTTP_ADDR must fail")
	}
}

// With ADMIN_ADDR the public listener keeps the API, /healthz and a /readyz
// that says nothing about the dependencies; /metrics and the detailed
// /readyz are on the admin listener only.
func TestAdminAddrSeparatesTheOperationalEndpoints(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminAddr := ln.Addr().String()
	ln.Close()
	env := config.New(func(k string) string { return map[string]string{"ADMIN_ADDR": adminAddr}[k] })
	b := ReadBase(env, "x", ":8080")
	if err := env.Err(); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	reg := httpserver.NewRegistry()
	failing := httpserver.Check{Name: "postgres", Check: func(context.Context) error { return errors.New("dial db.internal:5432: refused") }}
	public, admin := b.Routers(logger, reg, failing)
	if admin == nil {
		t.Fatal("ADMIN_ADDR set: an admin handler is expected")
	}
	pub := httptest.NewServer(public)
	defer pub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.ServeAdmin(ctx, admin, logger) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	require.Eventually(t, func() bool { // the admin listener is starting
		conn, err := net.Dial("tcp", adminAddr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the admin listener never accepted")
	if code, _ := get(pub.URL + "/metrics"); code != http.StatusNotFound {
		t.Errorf("public /metrics answered %d", code)
	}
	code, body := get(pub.URL + "/readyz")
	if code != http.StatusServiceUnavailable || strings.Contains(body, "db.internal") || strings.Contains(body, "postgres") {
		t.Errorf("public /readyz: %d %s", code, body)
	}
	if code, _ := get(pub.URL + "/healthz"); code != http.StatusOK {
		t.Errorf("public /healthz answered %d", code)
	}
	code, body = get("http://" + adminAddr + "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "db.internal") {
		t.Errorf("admin /readyz: %d %s", code, body)
	}
	if code, body := get("http://" + adminAddr + "/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("admin /metrics: %d", code)
	}

	// Without ADMIN_ADDR everything stays on the one router.
	one, none := ReadBase(config.New(func(string) string { return "" }), "x", ":8080").Routers(logger, httpserver.NewRegistry())
	if none != nil {
		t.Fatal("no ADMIN_ADDR: no admin handler")
	}
	srv := httptest.NewServer(one)
	defer srv.Close()
	if code, _ := get(srv.URL + "/metrics"); code != http.StatusOK {
		t.Errorf("/metrics without ADMIN_ADDR answered %d", code)
	}
}

// Not parallel: the soft memory limit is the process's. Without GOMEMLIMIT
// a service takes 90% of its container's limit and says so; with it, the
// operator's stands.
func TestRunLimitsMemoryToTheContainersUnlessGOMEMLIMITIsSet(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	root := fstest.MapFS{"sys/fs/cgroup/memory.max": {Data: []byte("268435456\n")}}
	var logs strings.Builder
	logger := slog.New(slog.NewJSONHandler(&logs, nil))

	restore := Base{}.limitMemory(logger, root)
	container := int64(256 << 20)
	if got, want := debug.SetMemoryLimit(-1), int64(float64(container)*memlimit.Ratio); got != want {
		t.Errorf("soft limit %d, want %d", got, want)
	}
	restore()
	if !strings.Contains(logs.String(), `"container_limit_bytes":268435456`) {
		t.Errorf("the chosen limit is not logged: %s", logs.String())
	}
	restore = Base{GoMemLimitSet: true}.limitMemory(logger, root)
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("GOMEMLIMIT set: the limit moved to %d", got)
	}
}

// `<binary> --version` and `<binary> version` print the build's line and
// run nothing; an unknown word is refused.
func TestDispatchVersion(t *testing.T) {
	t.Parallel()
	run := func(context.Context, func(string) string, io.Writer) error {
		t.Error("--version must not run the service")
		return nil
	}
	want := buildinfo.Get().String("webhook-api") + "\n"
	for _, arg := range []string{"--version", "version"} {
		var out strings.Builder
		if err := dispatch(context.Background(), "webhook-api", []string{arg}, run, func(string) string { return "" }, &out); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if out.String() != want || !strings.HasPrefix(out.String(), "webhook-api dev (commit ") {
			t.Fatalf("%s printed %q, want %q", arg, out.String(), want)
		}
	}
	err := dispatch(context.Background(), "webhook-api", []string{"--verison"}, run, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--version") {
		t.Fatalf("an unknown command must be refused naming the known ones, got %v", err)
	}
}
