package database

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Names of the pool metrics (aegis_db_pool_*), read from pgxpool.Stat at
// each scrape.
const (
	metricPoolAcquired     = "aegis_db_pool_acquired_conns"
	metricPoolIdle         = "aegis_db_pool_idle_conns"
	metricPoolConstructing = "aegis_db_pool_constructing_conns"
	metricPoolTotal        = "aegis_db_pool_total_conns"
	metricPoolMax          = "aegis_db_pool_max_conns"
	metricPoolAcquires     = "aegis_db_pool_acquires_total"
	metricPoolAcquireSecs  = "aegis_db_pool_acquire_seconds_total"
	metricPoolWaits        = "aegis_db_pool_acquire_waits_total"
	metricPoolWaitSecs     = "aegis_db_pool_acquire_wait_seconds_total"
	metricPoolCanceled     = "aegis_db_pool_canceled_acquires_total"
)

// PoolCollector exports a pgxpool's statistics: connections in use, idle,
// being opened, open in all and the maximum; acquires, how many had to wait
// for a connection (none was idle) and for how long in all. A pool at its
// maximum with waits climbing is a service queueing on its own database
// connections: its latency is the wait, not the statements.
type PoolCollector struct {
	pool *pgxpool.Pool

	acquired, idle, constructing, total, maxConns *prometheus.Desc
	acquires, acquireSecs, waits, waitSecs, canc  *prometheus.Desc
}

// NewPoolCollector returns the collector of pool. Register it once per
// pool, on the service's registry (RegisterPool).
func NewPoolCollector(pool *pgxpool.Pool) *PoolCollector {
	return &PoolCollector{
		pool:         pool,
		acquired:     prometheus.NewDesc(metricPoolAcquired, "Postgres pool connections in use (acquired).", nil, nil),
		idle:         prometheus.NewDesc(metricPoolIdle, "Postgres pool connections idle.", nil, nil),
		constructing: prometheus.NewDesc(metricPoolConstructing, "Postgres pool connections being opened.", nil, nil),
		total:        prometheus.NewDesc(metricPoolTotal, "Postgres pool connections open (acquired, idle and being opened).", nil, nil),
		maxConns:     prometheus.NewDesc(metricPoolMax, "The Postgres pool's maximum number of connections.", nil, nil),
		acquires:     prometheus.NewDesc(metricPoolAcquires, "Connections acquired from the Postgres pool.", nil, nil),
		acquireSecs:  prometheus.NewDesc(metricPoolAcquireSecs, "Time spent acquiring connections from the Postgres pool.", nil, nil),
		waits:        prometheus.NewDesc(metricPoolWaits, "Acquires from the Postgres pool that waited: no connection was idle.", nil, nil),
		waitSecs:     prometheus.NewDesc(metricPoolWaitSecs, "Time acquires waited for a Postgres pool connection when none was idle.", nil, nil),
		canc:         prometheus.NewDesc(metricPoolCanceled, "Acquires from the Postgres pool given up (their context ended) before a connection came.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.constructing, c.total, c.maxConns,
		c.acquires, c.acquireSecs, c.waits, c.waitSecs, c.canc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one pgxpool.Stat per scrape.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	send := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
		m, err := prometheus.NewConstMetric(d, t, v)
		if err != nil {
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}
	gauge := func(d *prometheus.Desc, v float64) { send(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) { send(d, prometheus.CounterValue, v) }
	gauge(c.acquired, float64(s.AcquiredConns()))
	gauge(c.idle, float64(s.IdleConns()))
	gauge(c.constructing, float64(s.ConstructingConns()))
	gauge(c.total, float64(s.TotalConns()))
	gauge(c.maxConns, float64(s.MaxConns()))
	counter(c.acquires, float64(s.AcquireCount()))
	counter(c.acquireSecs, s.AcquireDuration().Seconds())
	counter(c.waits, float64(s.EmptyAcquireCount()))
	counter(c.waitSecs, s.EmptyAcquireWaitTime().Seconds())
	counter(c.canc, float64(s.CanceledAcquireCount()))
}

// RegisterPool registers pool's collector on reg: each service calls it
// once, for the one pool it opens (Connect).
func RegisterPool(reg prometheus.Registerer, pool *pgxpool.Pool) error {
	if err := reg.Register(NewPoolCollector(pool)); err != nil {
		return fmt.Errorf("register postgres pool metrics: %w", err)
	}
	return nil
}
