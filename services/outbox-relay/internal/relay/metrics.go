package relay

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the relay's Prometheus metrics.
type Metrics struct {
	published   *prometheus.CounterVec
	failures    *prometheus.CounterVec
	batchSize   prometheus.Histogram
	commitToAck prometheus.Histogram
	pending     prometheus.Gauge
	oldestAge   prometheus.Gauge
	purged      prometheus.Counter
	lastSuccess prometheus.Gauge
}

// NewMetrics registers the relay's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_outbox_published_total", Help: "Outbox rows published to Kafka, by topic.",
		}, []string{"topic"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_outbox_publish_failures_total", Help: "Failed publish attempts, by error class.",
		}, []string{"class"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "aegis_outbox_batch_size", Help: "Rows per claimed batch.",
			Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500},
		}),
		commitToAck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "aegis_outbox_commit_to_ack_seconds", Help: "Time from the outbox row's commit to Kafka's ack.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 120},
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aegis_outbox_pending", Help: "Outbox rows not yet published (pending, processing, failed).",
		}),
		oldestAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aegis_outbox_oldest_pending_age_seconds", Help: "Age of the oldest unpublished outbox row.",
		}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aegis_outbox_purged_total", Help: "Outbox rows an earlier relay marked processed, deleted since (published rows are deleted when settled).",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aegis_outbox_relay_last_success_timestamp_seconds",
			Help: "Unix time this relay last finished a cycle without error (an empty one counts: nothing was due).",
		}),
	}
	reg.MustRegister(m.published, m.failures, m.batchSize, m.commitToAck, m.pending, m.oldestAge, m.purged, m.lastSuccess)
	return m
}
