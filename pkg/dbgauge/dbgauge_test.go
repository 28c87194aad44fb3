package dbgauge_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dbgauge"
)

var (
	ageDesc   = prometheus.NewDesc("test_age_seconds", "Age.", []string{"state"}, nil)
	countDesc = prometheus.NewDesc("test_count", "Count.", nil, nil)
)

// What a read emits is what a scrape exports, read at each scrape.
func TestAScrapeExportsWhatTheReadFinds(t *testing.T) {
	t.Parallel()
	n := 0.0
	c := dbgauge.New("test", slog.New(slog.DiscardHandler), func(_ context.Context, emit dbgauge.Emit) error {
		n++
		emit(ageDesc, 10*n, "A")
		emit(ageDesc, 20*n, "B")
		emit(countDesc, n)
		return nil
	}, ageDesc, countDesc)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP test_age_seconds Age.
# TYPE test_age_seconds gauge
test_age_seconds{state="A"} 10
test_age_seconds{state="B"} 20
# HELP test_count Count.
# TYPE test_count gauge
test_count 1
`)))
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP test_count Count.
# TYPE test_count gauge
test_count 2
`), "test_count"), "read again at the next scrape")
}

// A read that fails, or outlasts its bound, exports nothing: not a zero a
// rule would take for a figure.
func TestAFailedOrSlowReadExportsNothing(t *testing.T) {
	t.Parallel()
	failed := dbgauge.New("failed", slog.New(slog.DiscardHandler), func(_ context.Context, emit dbgauge.Emit) error {
		emit(countDesc, 3)
		return errors.New("connection refused")
	}, countDesc)
	require.Zero(t, testutil.CollectAndCount(failed))

	start := time.Now()
	slow := dbgauge.New("slow", slog.New(slog.DiscardHandler), func(ctx context.Context, emit dbgauge.Emit) error {
		emit(countDesc, 3)
		<-ctx.Done()
		return ctx.Err()
	}, countDesc).WithTimeout(50 * time.Millisecond)
	require.Zero(t, testutil.CollectAndCount(slow))
	require.Less(t, time.Since(start), dbgauge.Timeout, "the read was bounded")

	wrong := dbgauge.New("wrong labels", slog.New(slog.DiscardHandler), func(_ context.Context, emit dbgauge.Emit) error {
		emit(countDesc, 1)
		emit(ageDesc, 1) // its state label is missing
		return nil
	}, ageDesc, countDesc)
	require.Zero(t, testutil.CollectAndCount(wrong))
}
