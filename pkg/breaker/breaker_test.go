package breaker

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/errclass"
)

func newTestBreaker(t *testing.T, openFor time.Duration) (*Breaker[int], *Metrics) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	cfg := Defaults("psp:test")
	cfg.OpenFor = openFor
	b, err := New[int](cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), m)
	if err != nil {
		t.Fatal(err)
	}
	return b, m
}

func TestOpensAfterFiveTransientFailuresOnly(t *testing.T) {
	t.Parallel()
	b, m := newTestBreaker(t, time.Hour)
	calls := 0
	fail := func(err error) func() (int, error) {
		return func() (int, error) { calls++; return 0, err }
	}
	// Permanent errors never trip it, however many.
	for range 10 {
		_, _ = b.Execute(fail(errclass.AsPermanent(errors.New("invalid account"))))
	}
	if b.State() != Closed {
		t.Fatalf("permanent errors tripped the breaker: %s", b.State())
	}
	for range 5 {
		_, _ = b.Execute(fail(errors.New("503")))
	}
	if b.State() != Open {
		t.Fatalf("want open after 5 transient failures, got %s", b.State())
	}
	if got := testutil.ToFloat64(m.state.WithLabelValues("psp:test")); got != 2 {
		t.Fatalf("state gauge = %v, want 2", got)
	}
	before := calls
	_, err := b.Execute(fail(nil))
	if errclass.Of(err) != errclass.BreakerOpen {
		t.Fatalf("open breaker must refuse with BreakerOpen, got %v (%s)", err, errclass.Of(err))
	}
	if calls != before {
		t.Fatal("open breaker must not make the call")
	}
}

func TestHalfOpenProbeCloses(t *testing.T) {
	t.Parallel()
	b, _ := newTestBreaker(t, 20*time.Millisecond)
	for range 5 {
		_, _ = b.Execute(func() (int, error) { return 0, errors.New("timeout") })
	}
	if b.State() != Open {
		t.Fatalf("want open, got %s", b.State())
	}
	require.Eventually(t, func() bool { return b.State() == HalfOpen }, 5*time.Second, 5*time.Millisecond,
		"breaker never became half-open")
	v, err := b.Execute(func() (int, error) { return 7, nil })
	if err != nil || v != 7 {
		t.Fatalf("probe: %v %v", v, err)
	}
	if b.State() != Closed {
		t.Fatalf("successful probe must close the breaker, got %s", b.State())
	}
}
