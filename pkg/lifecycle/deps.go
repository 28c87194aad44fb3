package lifecycle

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/panics"
)

// Deps is what every component is given the same way, next to its own
// Config: the logger, the clock, the registry its metrics are registered
// on (never the global one) and the counter of the panics it recovers.
type Deps struct {
	Logger *slog.Logger
	// Clock is time.Now unless a test moves time itself.
	Clock func() time.Time
	// Registerer takes the component's metrics; nil: a registry of its own
	// (a test that does not read them).
	Registerer prometheus.Registerer
	// Panics counts recovered panics (panics.NewCounter on Registerer,
	// made once per service: a second one would collide on the registry).
	Panics *panics.Counter
}

// WithDefaults fills what is unset: a discarding logger, time.Now, a fresh
// registry, and no panic counting (panics are still recovered and logged).
func (d Deps) WithDefaults() Deps {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Registerer == nil {
		d.Registerer = prometheus.NewRegistry()
	}
	return d
}

// Supervised is Func with fn restarted after a panic (logged and counted
// on deps.Panics under name), a second later: a restart of that loop, not
// of the process.
func Supervised(name string, deps Deps, fn func(ctx context.Context) error) *Loop {
	deps = deps.WithDefaults()
	return Func(name, func(ctx context.Context) error {
		return deps.Panics.Loop(ctx, deps.Logger, name, time.Second, fn)
	})
}
