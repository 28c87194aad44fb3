package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RefusalLog accounts for webhooks refused before they were read: no
// signature, a bad one, or a timestamp outside the tolerance. Every refusal
// is counted (aegis_webhooks_refused_total by provider and reason); a log
// line is written at most once per interval per provider, carrying how many
// were refused since the previous line. A scanner or a misconfigured secret
// sends thousands of these; one line per request would flood the log
// pipeline and bury what matters.
//
// The source is the provider alone, not the remote address: behind a load
// balancer every address is the balancer's, and keyed by address an attacker
// rotating addresses would get a line per request again (and memory per
// address). The line names the latest remote address as a sample.
type RefusalLog struct {
	logger   *slog.Logger
	count    *prometheus.CounterVec
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	sources map[string]*refusals
}

type refusals struct {
	loggedAt time.Time
	// since counts refusals by reason after loggedAt that were not logged.
	since map[string]int
}

// NewRefusalLog registers aegis_webhooks_refused_total on reg and logs to
// logger at most once per interval per provider.
func NewRefusalLog(logger *slog.Logger, reg prometheus.Registerer, interval time.Duration, now func() time.Time) *RefusalLog {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_webhooks_refused_total",
		Help: "Webhooks refused before they were read, by provider and reason (missing_signature, invalid_signature, timestamp_out_of_tolerance).",
	}, []string{"provider", "reason"})
	reg.MustRegister(c)
	return &RefusalLog{logger: logger, count: c, interval: interval, now: now, sources: map[string]*refusals{}}
}

// Refused records one refused webhook.
func (l *RefusalLog) Refused(ctx context.Context, provider, reason, remoteAddr string) {
	l.count.WithLabelValues(provider, reason).Inc()
	now := l.now()
	l.mu.Lock()
	src := l.sources[provider]
	if src != nil && now.Sub(src.loggedAt) < l.interval {
		src.since[reason]++
		l.mu.Unlock()
		return
	}
	var suppressed map[string]int
	if src != nil {
		suppressed = src.since
	}
	l.sources[provider] = &refusals{loggedAt: now, since: map[string]int{}}
	l.mu.Unlock()

	total := 0
	for _, n := range suppressed {
		total += n
	}
	l.logger.WarnContext(ctx, "webhooks refused: signature missing, invalid or out of tolerance",
		"provider", provider, "reason", reason, "remote_addr", remoteAddr,
		"refused_since_last_line", total, "refused_since_last_line_by_reason", suppressed,
		"next_line_after", l.interval.String())
}
