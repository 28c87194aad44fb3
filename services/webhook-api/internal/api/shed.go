package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RetryAfter is the Retry-After of a webhook shed for overload: long enough
// for the line to drain (ingest.QueueBudget is a quarter of it), short
// enough that a PSP honouring it comes back while its event is fresh.
// Stripe and Paystack retry on any 5xx on their own schedules anyway.
const RetryAfter = "1"

// ShedLog accounts for webhooks shed because the commit line was full
// (ingest.ErrOverloaded): every one is counted (aegis_webhooks_shed_total by
// provider); a log line is written at most once per interval with how many
// were shed since the previous one. Overload is when a line per request
// would cost the most.
type ShedLog struct {
	logger   *slog.Logger
	count    *prometheus.CounterVec
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	loggedAt time.Time
	since    int
}

// NewShedLog registers aegis_webhooks_shed_total on reg and logs to logger
// at most once per interval.
func NewShedLog(logger *slog.Logger, reg prometheus.Registerer, interval time.Duration, now func() time.Time) *ShedLog {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_webhooks_shed_total",
		Help: "Webhooks answered 503 overloaded (with Retry-After) because the line waiting for a commit was full, by provider.",
	}, []string{"provider"})
	reg.MustRegister(c)
	return &ShedLog{logger: logger, count: c, interval: interval, now: now}
}

// Shed records one shed webhook.
func (l *ShedLog) Shed(ctx context.Context, provider string) {
	if l == nil {
		return
	}
	l.count.WithLabelValues(provider).Inc()
	now := l.now()
	l.mu.Lock()
	if !l.loggedAt.IsZero() && now.Sub(l.loggedAt) < l.interval {
		l.since++
		l.mu.Unlock()
		return
	}
	since := l.since
	l.loggedAt, l.since = now, 0
	l.mu.Unlock()
	l.logger.WarnContext(ctx, "webhooks shed: more arrive than Postgres commits; answered 503 with Retry-After",
		"provider", provider, "shed_since_last_line", since, "next_line_after", l.interval.String())
}
