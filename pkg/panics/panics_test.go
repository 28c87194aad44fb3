package panics_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/panics"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func setup(t *testing.T) (*panics.Counter, *slog.Logger, *syncBuffer) {
	t.Helper()
	var buf syncBuffer
	return panics.NewCounter(prometheus.NewRegistry()), slog.New(slog.NewJSONHandler(&buf, nil)), &buf
}

func TestCallTurnsAPanicIntoAPermanentError(t *testing.T) {
	t.Parallel()
	c, logger, logs := setup(t)
	err := c.Call(context.Background(), logger, "handler", func() error {
		var m map[string]int
		m["boom"]++ //nolint:staticcheck // SA5000 is the point: a nil map write, a real runtime panic
		return nil
	})
	var perr *panics.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, errclass.Permanent, errclass.Of(err))
	require.Contains(t, perr.Stack, "panics_test.go", "the stack names the panicking code")
	require.Equal(t, 1.0, c.Value("handler"))
	require.Contains(t, logs.String(), `"msg":"panic recovered"`)
	require.Contains(t, logs.String(), `"stack":`)

	require.NoError(t, c.Call(context.Background(), logger, "handler", func() error { return nil }))
	plain := errors.New("plain")
	require.ErrorIs(t, c.Call(context.Background(), logger, "handler", func() error { return plain }), plain)
	require.Equal(t, 1.0, c.Value("handler"), "only panics are counted")
}

func TestLoopRestartsAfterAPanic(t *testing.T) {
	t.Parallel()
	c, logger, _ := setup(t)
	runs := 0
	err := c.Loop(context.Background(), logger, "relay", time.Millisecond, func(ctx context.Context) error {
		runs++
		if runs < 3 {
			panic("loop bug")
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, runs)
	require.Equal(t, 2.0, c.Value("relay"))

	// A loop that keeps panicking stops when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.NoError(t, c.Loop(ctx, logger, "forever", 5*time.Millisecond, func(context.Context) error { panic("again") }))
	require.Greater(t, c.Value("forever"), 1.0)
}

func TestGoReportsThePanicOfABackgroundGoroutine(t *testing.T) {
	t.Parallel()
	c, logger, logs := setup(t)
	err := <-c.Go(context.Background(), logger, "sender", func() { panic("background") })
	require.ErrorContains(t, err, "panic in sender: background")
	require.True(t, strings.Contains(logs.String(), "background"))
	require.NoError(t, <-c.Go(context.Background(), logger, "sender", func() {}))
}

func TestNilCounterStillRecovers(t *testing.T) {
	t.Parallel()
	var c *panics.Counter
	err := c.Call(context.Background(), slog.New(slog.DiscardHandler), "x", func() error { panic("nil counter") })
	require.ErrorContains(t, err, "nil counter")
	require.Zero(t, c.Value("x"))
}
