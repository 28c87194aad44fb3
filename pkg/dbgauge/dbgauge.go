package dbgauge

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Timeout bounds one read: well inside Prometheus's default scrape timeout
// (10s), which the whole /metrics answer must meet.
const Timeout = 2 * time.Second

// Emit records one figure of a read: desc's value, with desc's variable
// labels' values in order.
type Emit func(desc *prometheus.Desc, value float64, labels ...string)

// Read reads the figures of one scrape from the database and emits them.
// It runs under a context bounded by Timeout; what it emitted is dropped if
// it returns an error.
type Read func(ctx context.Context, emit Emit) error

// Collector is a prometheus.Collector of gauges read by one Read.
type Collector struct {
	name    string
	descs   []*prometheus.Desc
	read    Read
	logger  *slog.Logger
	timeout time.Duration
}

// New returns a collector of the gauges descs, read by read. name says in
// logs what failed to read.
func New(name string, logger *slog.Logger, read Read, descs ...*prometheus.Desc) *Collector {
	return &Collector{name: name, descs: descs, read: read, logger: logger, timeout: Timeout}
}

// WithTimeout sets the bound on one read (tests); d <= 0 keeps Timeout.
func (c *Collector) WithTimeout(d time.Duration) *Collector {
	if d > 0 {
		c.timeout = d
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads the figures now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ms, err := c.gather(context.Background())
	if err != nil {
		c.logger.Warn("metrics: reading gauges from the database failed; not exported this scrape",
			"gauges", c.name, "error", err.Error())
		return
	}
	for _, m := range ms {
		ch <- m
	}
}

// gather reads the figures once, bounded by the collector's timeout.
func (c *Collector) gather(ctx context.Context) ([]prometheus.Metric, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var (
		out    []prometheus.Metric
		badErr error
	)
	err := c.read(ctx, func(desc *prometheus.Desc, value float64, labels ...string) {
		m, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, value, labels...)
		if err != nil && badErr == nil {
			badErr = fmt.Errorf("%s: %w", c.name, err)
		}
		out = append(out, m)
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.name, err)
	}
	if badErr != nil {
		return nil, badErr
	}
	return out, nil
}
