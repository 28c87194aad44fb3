package kafkax

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// MetricsSubsystem is the subsystem of the client metrics: they are named
// aegis_kafka_* (kprom's names under namespace aegis).
const MetricsSubsystem = "kafka"

// Metrics returns the client option that exports a franz-go client's own
// metrics (franz-go's kprom plugin) on reg, labelled client=name: broker
// connections and connection errors, bytes written and read and their
// errors (a produce or a fetch that failed on the wire), bytes and records
// produced and fetched per topic, records buffered, and the request
// round-trip time (aegis_kafka_request_duration_e2e_seconds). name tells the
// clients of one service apart (a service with two clients passes two
// names); each name is registered once on a registry. Pass it with the
// other options to NewClient.
//
// kprom registers its metrics when the client is made and unregisters them
// when it is closed. A registration refused (a name given twice on one
// registry) is logged, and the client runs without those metrics, rather
// than failing the client.
func Metrics(reg prometheus.Registerer, name string, logger *slog.Logger) kgo.Opt {
	if logger == nil {
		logger = slog.Default()
	}
	m := kprom.NewMetrics("aegis",
		kprom.Registerer(&softRegisterer{reg: reg, logger: logger, client: name, registered: map[prometheus.Collector]bool{}}),
		kprom.Subsystem(MetricsSubsystem),
		kprom.WithStaticLabel(prometheus.Labels{"client": name}),
		kprom.FetchAndProduceDetail(kprom.ByTopic, kprom.UncompressedBytes, kprom.Records),
		// Per broker, not per host: a broker keeps its id across restarts.
		kprom.BrokerLabels(kprom.BrokerNodeID),
		kprom.Histograms(kprom.RequestDurationE2E),
		// Classic buckets only, as every other Aegis histogram: the
		// dashboard's histogram_quantile reads _bucket series.
		kprom.NativeBucketFactor(1),
	)
	return kgo.WithHooks(m)
}

// softRegisterer is the registerer kprom gets: kprom registers with
// MustRegister (a panic inside kgo.NewClient when refused), which becomes a
// logged warning here; and it unregisters only what it registered, so that
// closing a client whose registration was refused does not take away the
// metrics of the client registered under that name first (a registry
// unregisters by descriptor, not by instance).
type softRegisterer struct {
	reg    prometheus.Registerer
	logger *slog.Logger
	client string

	mu         sync.Mutex
	registered map[prometheus.Collector]bool
}

func (s *softRegisterer) Register(c prometheus.Collector) error {
	if err := s.reg.Register(c); err != nil {
		return fmt.Errorf("register kafka client %s metric: %w", s.client, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registered[c] = true
	return nil
}

func (s *softRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := s.Register(c); err != nil {
			s.logger.Warn("kafka client metric not registered", "client", s.client, "error", err)
		}
	}
}

func (s *softRegisterer) Unregister(c prometheus.Collector) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.registered[c] {
		return false
	}
	delete(s.registered, c)
	return s.reg.Unregister(c)
}
