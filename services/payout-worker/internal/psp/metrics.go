package psp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/errclass"
)

// Operations of a PSP call (the operation label of aegis_psp_call_seconds).
const (
	OpCreate = "create"
	OpFind   = "find"
)

// CallMetrics time the calls to the PSPs: aegis_psp_call_seconds by
// provider, operation (create, find) and result ("ok", "not_found" for a
// lookup the PSP answered with no object, else the error's class).
// Buckets span a quick answer (50 ms) to the call timeout's order (30 s).
type CallMetrics struct {
	seconds *prometheus.HistogramVec
}

// NewCallMetrics registers the call metrics on reg: once per process, shared
// by every provider's client (Timed).
func NewCallMetrics(reg prometheus.Registerer) (*CallMetrics, error) {
	m := &CallMetrics{seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aegis_psp_call_seconds",
		Help:    "PSP call latency by provider, operation (create, find) and result (ok, not_found or the error class).",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30},
	}, []string{"provider", "operation", "result"})}
	if err := reg.Register(m.seconds); err != nil {
		return nil, fmt.Errorf("register PSP call metrics: %w", err)
	}
	return m, nil
}

// Timed returns c with every call it makes timed on m. Put it under the
// breaker (WithBreaker(Timed(c, m), br)): a call the breaker refuses is
// never made, so it has no latency.
func Timed(c Client, m *CallMetrics) Client { return timed{Client: c, m: m} }

type timed struct {
	Client
	m *CallMetrics
}

func (t timed) CreatePayout(ctx context.Context, req Request) (Result, error) {
	start := time.Now()
	res, err := t.Client.CreatePayout(ctx, req)
	t.m.observe(t.Provider(), OpCreate, err, time.Since(start))
	return res, err
}

func (t timed) FindPayout(ctx context.Context, l Lookup) (Result, error) {
	start := time.Now()
	res, err := t.Client.FindPayout(ctx, l)
	t.m.observe(t.Provider(), OpFind, err, time.Since(start))
	return res, err
}

func (m *CallMetrics) observe(provider, op string, err error, d time.Duration) {
	result := "ok"
	switch {
	case errors.Is(err, ErrNotFound):
		result = "not_found"
	case err != nil:
		result = string(errclass.Of(err))
	}
	m.seconds.WithLabelValues(provider, op, result).Observe(d.Seconds())
}
