package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The development server runs with autovacuum = off (its CI
// configuration); no deployment does, and migration 000004 tunes
// transaction_outbox's autovacuum for the churn of its rows (each inserted,
// claimed and settled). Without a vacuum a scenario measures the server's
// configuration, not the suite: on 2026-11-26 the e2e's transaction_outbox
// grew to 815 MB for 178k live rows, far beyond shared_buffers, and the
// relay's settle statement, reading ~2,400 blocks a call from outside them,
// took 43 % of Postgres's statement time (24 ms a call); with autovacuum on,
// 4 % (0.3 ms a call; pg_stat_statements, docs/reports/benchmarks.md). So on such a
// server the bench does autovacuum's work itself, by autovacuum's rule.

// autovacuumOff reports whether the server runs without autovacuum.
func autovacuumOff(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var autovacuum string
	if err := pool.QueryRow(ctx, "SHOW autovacuum").Scan(&autovacuum); err != nil {
		return false, fmt.Errorf("read the server's autovacuum setting: %w", err)
	}
	return autovacuum != "on", nil
}

// sqlVacuumDue lists the tables autovacuum would vacuum now: more dead rows
// than the table's threshold plus its scale factor times its rows (its own
// storage parameters, else the server's), the trigger autovacuum uses.
// Vacuums triggered by inserts alone are left out: they set visibility bits
// for index-only scans, which nothing on the suite's hot paths relies on.
const sqlVacuumDue = `
SELECT format('%I.%I', s.schemaname, s.relname)
FROM pg_stat_user_tables s
JOIN pg_class c ON c.oid = s.relid
WHERE s.n_dead_tup > coalesce((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
                               WHERE option_name = 'autovacuum_vacuum_threshold'),
                              current_setting('autovacuum_vacuum_threshold')::float8)
                   + coalesce((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
                               WHERE option_name = 'autovacuum_vacuum_scale_factor'),
                              current_setting('autovacuum_vacuum_scale_factor')::float8) * greatest(c.reltuples, 0)
ORDER BY s.n_dead_tup DESC`

// vacuumDue vacuums (and analyzes) each table autovacuum would vacuum now,
// and returns how many it vacuumed.
func vacuumDue(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	rows, err := pool.Query(ctx, sqlVacuumDue)
	if err != nil {
		return 0, fmt.Errorf("list the tables due for a vacuum: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list the tables due for a vacuum: %w", err)
	}
	for i, t := range tables {
		if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+t); err != nil {
			return i, fmt.Errorf("vacuum %s: %w", t, err)
		}
	}
	return len(tables), nil
}

// vacuumIfAutovacuumIsOff vacuums what autovacuum would have by now, once,
// on a server without it: before a phase that starts after a burst (the
// relay's latency phase after its drains, the e2e's recovery step after
// the overload) and which autovacuum would have cleaned up after in a
// deployment.
func vacuumIfAutovacuumIsOff(ctx context.Context, r *Runner, pool *pgxpool.Pool, phase string) error {
	if off, err := autovacuumOff(ctx, pool); err != nil || !off {
		return err
	}
	n, err := vacuumDue(ctx, pool)
	r.progress("%s: the server runs without autovacuum; vacuumed the %d tables autovacuum would have", phase, n)
	return err
}

// standInForAutovacuum does autovacuum's work while the suite runs, on a
// server without it: once per the server's autovacuum_naptime (1 min by
// default), as autovacuum visits a database, it vacuums the tables that are
// due. At autovacuum's cadence, not faster: a vacuum scans each index of its
// table whole, and visiting every second made the relay's p99 seconds
// long. It does nothing when the server runs autovacuum itself. stop ends
// it and returns how many vacuums it ran and the first error, if any.
func standInForAutovacuum(ctx context.Context, r *Runner, pool *pgxpool.Pool, label string) (stop func() (int, error), err error) {
	off, err := autovacuumOff(ctx, pool)
	if err != nil || !off {
		return func() (int, error) { return 0, nil }, err
	}
	var naptime int // seconds
	if err := pool.QueryRow(ctx, "SELECT setting::int FROM pg_settings WHERE name = 'autovacuum_naptime'").Scan(&naptime); err != nil {
		return nil, fmt.Errorf("read the server's autovacuum_naptime: %w", err)
	}
	r.progress("%s: the server runs without autovacuum; every %d s, vacuuming the tables autovacuum would, while the suite runs", label, naptime)
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		runs  int
		first error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Duration(naptime) * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			n, err := vacuumDue(ctx, pool)
			runs += n
			if err != nil && !errors.Is(err, context.Canceled) && first == nil {
				first = err
			}
		}
	}()
	return func() (int, error) {
		cancel()
		wg.Wait()
		return runs, first
	}, nil
}
