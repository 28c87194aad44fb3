package breaker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/errclass"
)

// Config is one breaker's policy.
type Config struct {
	Name string
	// ConsecutiveFailures trips the breaker.
	ConsecutiveFailures uint32
	// OpenFor is how long it stays open before letting probes through.
	OpenFor time.Duration
	// HalfOpenProbes is how many calls may run while half-open.
	HalfOpenProbes uint32
}

// Defaults returns the seeds' policy for name.
func Defaults(name string) Config {
	return Config{Name: name, ConsecutiveFailures: 5, OpenFor: 30 * time.Second, HalfOpenProbes: 1}
}

// Validate reports a policy that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.ConsecutiveFailures < 1 {
		errs = append(errs, config.Invalid("ConsecutiveFailures", "must be at least 1"))
	}
	if c.OpenFor <= 0 {
		errs = append(errs, config.Invalid("OpenFor", "must be positive"))
	}
	if c.HalfOpenProbes < 1 {
		errs = append(errs, config.Invalid("HalfOpenProbes", "must be at least 1"))
	}
	return errors.Join(errs...)
}

// Metrics are the breaker gauges and counters, shared by a service's breakers.
type Metrics struct {
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
}

// NewMetrics registers breaker metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_breaker_state",
			Help: "Circuit breaker state by dependency: 0 closed, 1 half-open, 2 open.",
		}, []string{"breaker"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_breaker_transitions_total",
			Help: "Circuit breaker state changes by dependency and new state.",
		}, []string{"breaker", "to"}),
	}
	reg.MustRegister(m.state, m.transitions)
	return m
}

// Breaker guards calls to one dependency.
type Breaker[T any] struct {
	cb *gobreaker.CircuitBreaker[T]
}

// New returns a breaker for cfg.
func New[T any](cfg Config, logger *slog.Logger, m *Metrics) (*Breaker[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("breaker %s: %w", cfg.Name, err)
	}
	m.state.WithLabelValues(cfg.Name).Set(0)
	cb := gobreaker.NewCircuitBreaker[T](gobreaker.Settings{
		Name:        cfg.Name,
		MaxRequests: cfg.HalfOpenProbes,
		Timeout:     cfg.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= cfg.ConsecutiveFailures },
		IsSuccessful: func(err error) bool {
			switch errclass.Of(err) {
			case "", errclass.Permanent, errclass.Canceled, errclass.Poison:
				return true
			}
			return false
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			m.state.WithLabelValues(name).Set(float64(stateValue(to)))
			m.transitions.WithLabelValues(name, string(stateOf(to))).Inc()
			logger.Warn("circuit breaker state changed", "breaker", name, "from", string(stateOf(from)), "to", string(stateOf(to)))
		},
	})
	return &Breaker[T]{cb: cb}, nil
}

// Execute runs fn unless the breaker is open. A refused call returns an
// error of class errclass.BreakerOpen.
func (b *Breaker[T]) Execute(fn func() (T, error)) (T, error) {
	v, err := b.cb.Execute(fn)
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return v, errclass.New(errclass.BreakerOpen, fmt.Errorf("%s: %w", b.cb.Name(), err))
	}
	return v, err
}

// State is a breaker's state, as the aegis_breaker_transitions_total "to"
// label, the logs and the alert rules name it.
type State string

const (
	Closed   State = "closed"
	HalfOpen State = "half-open"
	Open     State = "open"
)

// States is every breaker state, in gauge order (aegis_breaker_state 0, 1, 2).
func States() []State { return []State{Closed, HalfOpen, Open} }

func stateOf(s gobreaker.State) State {
	switch s {
	case gobreaker.StateHalfOpen:
		return HalfOpen
	case gobreaker.StateOpen:
		return Open
	}
	return Closed
}

// State reports the breaker's state.
func (b *Breaker[T]) State() State { return stateOf(b.cb.State()) }

func stateValue(s gobreaker.State) int {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}
