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

// metrics are intake's own counters; the loop's (failed attempts, progress,
// lag) are pkg/consumer's aegis_consumer_* by .dlq topic.
type metrics struct {
	// ingested counts records by dead-letter topic (never the original topic
	// from a header, which a bad record could make unbounded) and result.
	ingested  *prometheus.CounterVec
	malformed *prometheus.CounterVec
	storedRaw *prometheus.CounterVec
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
		storedRaw: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_dlq_stored_raw_total",
			Help: "Dead letters Postgres refused as read and that were stored in their raw form instead, by .dlq topic.",
		}, []string{"topic"}),
	}
	for _, c := range []prometheus.Collector{m.ingested, m.malformed, m.storedRaw} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register consumer metrics: %w", err)
		}
	}
	return m, nil
}
