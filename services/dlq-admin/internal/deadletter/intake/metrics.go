package intake

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of aegis_dlq_ingested_total.
const (
	resultStored    = "stored"
	resultDuplicate = "duplicate"
)

type metrics struct {
	// ingested counts records by dead-letter topic (never the original topic
	// from a header, which a bad record could make unbounded) and result.
	ingested       *prometheus.CounterVec
	malformed      *prometheus.CounterVec
	storeFailures  prometheus.Counter
	commitFailures prometheus.Counter
	storedRaw      *prometheus.CounterVec
	released       prometheus.Counter
	progress       *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_dlq_ingested_total",
			Help: "Dead-letter records consumed, by .dlq topic and result (stored, duplicate).",
		}, []string{"topic", "result"}),
		malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_dlq_ingested_malformed_total",
			Help: "Dead-letter records stored although their failure headers were malformed, by .dlq topic.",
		}, []string{"topic"}),
		storeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aegis_dlq_store_failures_total",
			Help: "Attempts to store a batch of dead letters that Postgres refused (the batch is retried, offsets not committed).",
		}),
		commitFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aegis_dlq_commit_failures_total",
			Help: "Offset commits that failed after their batch was stored (the batch is redelivered and deduplicated).",
		}),
		storedRaw: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_dlq_stored_raw_total",
			Help: "Dead letters Postgres refused as read and that were stored in their raw form instead, by .dlq topic.",
		}, []string{"topic"}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aegis_dlq_batches_released_total",
			Help: "Batches that could not be stored within DLQ_STORE_RETRY_FOR and were released to be polled again.",
		}),
		progress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_dlq_consumer_last_progress_timestamp_seconds",
			Help: "Unix time dlq-admin last committed stored dead letters on a .dlq partition.",
		}, []string{"topic", "partition"}),
	}
	for _, c := range []prometheus.Collector{m.ingested, m.malformed, m.storeFailures, m.commitFailures, m.storedRaw, m.released, m.progress} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register consumer metrics: %w", err)
		}
	}
	return m, nil
}
