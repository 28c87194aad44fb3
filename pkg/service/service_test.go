package service

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aegis-payments/aegis/pkg/config"
)

func TestReadBase(t *testing.T) {
	t.Parallel()
	env := config.New(func(k string) string {
		return map[string]string{"HTTP_ADDR": "nonsense", "LOG_LEVEL": "loud", "SHUTDOWN_GRACE": "-1s"}[k]
	})
	b := ReadBase(env, "x", ":8080")
	err := env.Err()
	if err == nil {
		t.Fatal("bad values must be reported")
	}
	for _, want := range []string{"HTTP_ADDR", "LOG_LEVEL", "SHUTDOWN_GRACE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if b.DatabaseURL != DefaultDatabaseURL {
		t.Errorf("DATABASE_URL default = %q", b.DatabaseURL)
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
