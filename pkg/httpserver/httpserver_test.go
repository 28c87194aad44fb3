package httpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/buildinfo"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/logging"
)

func TestRouterOperationalEndpointsAndErrors(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	healthy := true
	r := httpserver.NewRouter(logger, httpserver.NewRegistry(), httpserver.Check{Name: "postgres", Check: func(context.Context) error {
		if healthy {
			return nil
		}
		return errors.New("connection refused")
	}})
	var seenCorrelation string
	r.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("bug") })
	r.Get("/corr", func(w http.ResponseWriter, req *http.Request) {
		seenCorrelation = logging.CorrelationID(req.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(r)
	defer srv.Close()

	get := func(path string, hdr ...string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &body)
		return resp, body
	}

	resp, _ := get("/healthz")
	require.Equal(t, 200, resp.StatusCode)
	resp, body := get("/readyz")
	require.Equal(t, 200, resp.StatusCode, body)
	healthy = false
	resp, body = get("/readyz")
	require.Equal(t, 503, resp.StatusCode)
	require.Contains(t, body["checks"].(map[string]any)["postgres"], "connection refused")

	resp, body = get("/nope")
	require.Equal(t, 404, resp.StatusCode)
	require.Equal(t, "not_found", body["error"].(map[string]any)["code"])

	resp, body = get("/boom")
	require.Equal(t, 500, resp.StatusCode)
	require.Equal(t, "internal", body["error"].(map[string]any)["code"])

	resp, _ = get("/corr", httpserver.HeaderCorrelationID, "abc-123")
	require.Equal(t, "abc-123", seenCorrelation)
	require.Equal(t, "abc-123", resp.Header.Get(httpserver.HeaderCorrelationID))
	get("/corr", httpserver.HeaderCorrelationID, "bad value with spaces")
	require.Len(t, seenCorrelation, 32, "an unsafe correlation id is replaced")

	mresp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer mresp.Body.Close()
	metrics, _ := io.ReadAll(mresp.Body)
	require.Contains(t, string(metrics), `aegis_http_request_duration_seconds_count{method="GET",route="/readyz",status="503"} 1`)
}

func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	started := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- httpserver.Serve(ctx, ln, h, logger, 5*time.Second) }()

	respc := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			respc <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		respc <- string(b)
	}()
	<-started
	cancel() // SIGTERM arrives while a request is in flight
	// Shutting down: the listener no longer accepts.
	require.Eventually(t, func() bool {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			conn.Close()
		}
		return err != nil
	}, 10*time.Second, 5*time.Millisecond, "the listener kept accepting after shutdown began")
	close(release)
	require.Equal(t, "finished", <-respc, "in-flight request must complete")
	require.NoError(t, <-done)
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	require.Error(t, err, "listener must be closed after shutdown")
}

// From SIGTERM on, /readyz answers 503 while the listener still serves:
// whatever polls readiness stops routing here before the listener closes.
func TestServeDrainingAnswersNotReadyBeforeTheListenerCloses(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	r := httpserver.NewRouter(logger, httpserver.NewRegistry())
	r.Get("/work", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "done") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	const drain = 3 * time.Second
	go func() { done <- httpserver.ServeDraining(ctx, ln, r, logger, drain, 5*time.Second) }()

	get := func(path string) (int, string) {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := get("/readyz")
	require.Equal(t, http.StatusOK, code, "ready before the stop")

	cancel() // SIGTERM
	stopped := time.Now()
	require.Eventually(t, func() bool {
		code, _ := get("/readyz")
		return code == http.StatusServiceUnavailable
	}, drain, 5*time.Millisecond, "/readyz must answer 503 once the service is stopping")
	// The listener still accepts and serves during the drain.
	code, body := get("/work")
	require.Less(t, time.Since(stopped), drain, "the machine was too slow to observe the drain")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "done", body)

	require.NoError(t, <-done)
	require.GreaterOrEqual(t, time.Since(stopped), drain, "the listener closed before the drain ended")
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	require.Error(t, err, "listener must be closed after shutdown")
}

// Every service's registry (NewRegistry) exports the running build, so
// /metrics says which release a replica runs.
func TestRegistryExportsTheBuild(t *testing.T) {
	t.Parallel()
	r := httpserver.NewRouter(slog.New(slog.DiscardHandler), httpserver.NewRegistry())
	srv := httptest.NewServer(r)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	info := buildinfo.Get()
	want := fmt.Sprintf(`aegis_build_info{commit=%q,go=%q,version=%q} 1`, info.Commit, info.Go, info.Version)
	require.Contains(t, string(body), want)
}
