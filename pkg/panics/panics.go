package panics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/aegis-payments/aegis/pkg/errclass"
)

// Error is a recovered panic.
type Error struct {
	Component string
	Value     any
	Stack     string
}

func (e *Error) Error() string { return fmt.Sprintf("panic in %s: %v", e.Component, e.Value) }

// Counter counts recovered panics by component. A nil *Counter recovers and
// logs but counts nothing (tests that do not look at metrics).
type Counter struct {
	vec *prometheus.CounterVec
}

// NewCounter registers aegis_panics_total on reg.
func NewCounter(reg prometheus.Registerer) *Counter {
	c := &Counter{vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_panics_total",
		Help: "Panics recovered, by component; each one is a bug whose message was dead-lettered or whose loop restarted.",
	}, []string{"component"})}
	reg.MustRegister(c.vec)
	return c
}

// Value returns how many panics component has had (for tests and /readyz).
func (c *Counter) Value(component string) float64 {
	if c == nil {
		return 0
	}
	var m dto.Metric
	if err := c.vec.WithLabelValues(component).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// Call runs fn; a panic in it is logged with its stack, counted under
// component and returned as a permanent *Error (errclass.Permanent), so a
// consumer dead-letters the message instead of retrying it.
func (c *Counter) Call(ctx context.Context, logger *slog.Logger, component string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = c.recovered(ctx, logger, component, p)
		}
	}()
	return fn()
}

// Go runs fn in a goroutine; a panic is recovered, logged and counted, and
// reported on the returned channel (nil when fn returned normally). For
// background goroutines whose failure must not take the process down.
func (c *Counter) Go(ctx context.Context, logger *slog.Logger, component string, fn func()) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- c.Call(ctx, logger, component, func() error { fn(); return nil })
	}()
	return done
}

// Loop runs fn until ctx is done or fn returns without panicking; after a
// panic it waits restartAfter (or until ctx is done) and runs fn again: a
// restart of that loop, not of the process. It returns fn's last result.
func (c *Counter) Loop(ctx context.Context, logger *slog.Logger, component string, restartAfter time.Duration, fn func(context.Context) error) error {
	for {
		var perr *Error
		err := c.Call(ctx, logger, component, func() error { return fn(ctx) })
		if err == nil || !errors.As(err, &perr) {
			return err
		}
		logger.ErrorContext(ctx, "restarting loop after a panic", "component", component, "restart_in", restartAfter.String())
		t := time.NewTimer(restartAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (c *Counter) recovered(ctx context.Context, logger *slog.Logger, component string, p any) error {
	e := &Error{Component: component, Value: p, Stack: string(debug.Stack())}
	if c != nil {
		c.vec.WithLabelValues(component).Inc()
	}
	logger.ErrorContext(ctx, "panic recovered", "component", component, "panic", fmt.Sprint(p), "stack", e.Stack)
	return errclass.AsPermanent(e)
}
