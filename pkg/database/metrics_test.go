package database_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// poolValues gathers reg and returns each aegis_db_pool_* metric's value.
func poolValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		require.Len(t, mf.GetMetric(), 1, mf.GetName())
		m := mf.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			out[mf.GetName()] = m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			out[mf.GetName()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// The pool collector reports a real pool's connections as they are taken,
// waited for and given up on.
func TestPoolCollectorOnARealPool(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	pool, err := database.Connect(ctx, db.URL, database.Options{MaxConns: 2, ApplicationName: "pool-metrics-test"})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, database.RegisterPool(reg, pool))
	require.Error(t, database.RegisterPool(reg, pool), "a pool's collector registers once")

	// Connect's ping opened the first connection: an acquire that waited
	// for it to be made.
	v := poolValues(t, reg)
	require.Equal(t, map[string]float64{
		"aegis_db_pool_acquired_conns": 0, "aegis_db_pool_idle_conns": 1, "aegis_db_pool_constructing_conns": 0,
		"aegis_db_pool_total_conns": 1, "aegis_db_pool_max_conns": 2,
		"aegis_db_pool_acquires_total": 1, "aegis_db_pool_acquire_waits_total": 1, "aegis_db_pool_canceled_acquires_total": 0,
		"aegis_db_pool_acquire_seconds_total":      v["aegis_db_pool_acquire_seconds_total"],
		"aegis_db_pool_acquire_wait_seconds_total": v["aegis_db_pool_acquire_wait_seconds_total"],
	}, v)
	require.Positive(t, v["aegis_db_pool_acquire_wait_seconds_total"], "opening a connection takes time")

	// Both connections in use: the idle one, and one more opened.
	var held []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, c)
	}
	v = poolValues(t, reg)
	require.EqualValues(t, 2, v["aegis_db_pool_acquired_conns"])
	require.EqualValues(t, 0, v["aegis_db_pool_idle_conns"])
	require.EqualValues(t, 2, v["aegis_db_pool_total_conns"])
	require.EqualValues(t, 3, v["aegis_db_pool_acquires_total"])
	require.EqualValues(t, 2, v["aegis_db_pool_acquire_waits_total"])

	// A third acquire finds the pool at its maximum and gives up.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = pool.Acquire(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.EqualValues(t, 1, poolValues(t, reg)["aegis_db_pool_canceled_acquires_total"])

	for _, c := range held {
		c.Release()
	}
	v = poolValues(t, reg)
	require.EqualValues(t, 0, v["aegis_db_pool_acquired_conns"])
	require.EqualValues(t, 2, v["aegis_db_pool_idle_conns"])
}
