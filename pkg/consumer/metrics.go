package consumer

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the loop's Prometheus metrics, by topic: every loop of a
// process shares them (each consumes its own topics).
type metrics struct {
	handled   *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	exhausted *prometheus.CounterVec
	progress  *prometheus.GaugeVec
	lag       *prometheus.GaugeVec
	// dlqFailing is 1 while this process cannot write a topic's dead
	// letters (the last write given up on), 0 once one is written.
	dlqFailing *prometheus.GaugeVec
}

// MetricDeadLetterPublishFailing is the condition
// AegisDeadLetterPublishFailing pages on.
const MetricDeadLetterPublishFailing = "aegis_consumer_dead_letter_publish_failing"

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	var err error
	m := &metrics{}
	if m.handled, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_consumer_messages_total", Help: "Messages handled, by topic and outcome.",
	}, []string{"topic", "outcome"})); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "aegis_consumer_handle_seconds", Help: "Time to handle one message.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30},
	}, []string{"topic"})); err != nil {
		return nil, err
	}
	if m.exhausted, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_consumer_retry_exhausted_total", Help: "Records whose in-place retries ran out (then dead-lettered), by topic.",
	}, []string{"topic"})); err != nil {
		return nil, err
	}
	if m.progress, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "aegis_consumer_last_progress_timestamp_seconds",
		Help: "Unix time this process last committed an offset on a partition.",
	}, []string{"topic", "partition"})); err != nil {
		return nil, err
	}
	if m.lag, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "aegis_consumer_lag",
		Help: "Records after the last one this process finished on a partition, from the fetch's high watermark.",
	}, []string{"topic", "partition"})); err != nil {
		return nil, err
	}
	if m.dlqFailing, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricDeadLetterPublishFailing,
		Help: "1 while this process cannot write a dead letter of the topic (its last write was given up on and the record " +
			"is redelivered), 0 once one is written.",
	}, []string{"topic"})); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c on reg, or returns the collector already registered
// under its name by another loop of the process.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register consumer metrics: %w", err)
}
