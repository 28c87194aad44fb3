package deliver

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names (docs/design/outbound.md, "Metrics and alerts").
const (
	MetricAttempts     = "aegis_outbound_attempts_total"
	MetricAttemptTime  = "aegis_outbound_attempt_seconds"
	MetricPending      = "aegis_outbound_pending"
	MetricOldest       = "aegis_outbound_oldest_pending_seconds"
	MetricDeliveredLag = "aegis_outbound_delivered_lag_seconds"
	MetricDisabled     = "aegis_outbound_endpoints_disabled_total"
	// MetricDisabledNow is the condition AegisOutboundEndpointDisabled
	// pages on: endpoints the relay disabled that are still disabled.
	MetricDisabledNow = "aegis_outbound_endpoints_disabled"
)

type metrics struct {
	attempts    *prometheus.CounterVec
	attemptTime *prometheus.HistogramVec
	pending     *prometheus.GaugeVec
	oldest      *prometheus.GaugeVec
	lag         *prometheus.HistogramVec
	disabled    *prometheus.CounterVec
	disabledNow *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAttempts,
			Help: "Outbound delivery attempts by endpoint and outcome (delivered, retry, failed)."}, []string{"endpoint", "outcome"}),
		attemptTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricAttemptTime,
			Help:    "Latency of outbound delivery attempts (request sent to answer read), by endpoint.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30}}, []string{"endpoint"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricPending,
			Help: "Pending outbound deliveries by endpoint (every relay replica exports the same figure: take max)."}, []string{"endpoint"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricOldest,
			Help: "Age of the oldest pending outbound delivery by endpoint, 0 when none (every replica exports the same figure: take max)."}, []string{"endpoint"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricDeliveredLag,
			Help:    "From an event's occurred_at to its endpoint's 2xx answer, by endpoint.",
			Buckets: []float64{0.1, 0.5, 1, 5, 30, 60, 300, 1800, 7200, 18000, 36000, 100000}}, []string{"endpoint"}),
		disabled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDisabled,
			Help: "Outbound endpoints the relay disabled, by reason (gone: answered 410; failing: failed every attempt for OUTBOUND_DISABLE_AFTER)."}, []string{"reason"}),
		disabledNow: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricDisabledNow,
			Help: "Undeleted outbound endpoints the relay disabled and nobody enabled since, by reason (gone, failing), from the " +
				"database (every replica exports the same figure: take max)."}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.attempts, m.attemptTime, m.pending, m.oldest, m.lag, m.disabled, m.disabledNow} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register outbound metrics: %w", err)
		}
	}
	// Both reasons exist from the start: a rule's increase() sees the first
	// disabling (a series born at 1 would show none).
	for _, reason := range []string{reasonGone, reasonFailing} {
		m.disabled.WithLabelValues(reason)
	}
	return m, nil
}
