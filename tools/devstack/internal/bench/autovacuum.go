package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// autovacuumOff reports whether the server runs without autovacuum (the
// development server does: autovacuum = off in its CI configuration).
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

// standInForAutovacuum does, while the suite runs, what autovacuum would
// do on a server configured as a deployment's is: once per the server's
// autovacuum_naptime (1 min by default), as autovacuum visits a database,
// it vacuums (and analyzes) each table autovacuum would vacuum by now. At
// its own cadence, not faster: a vacuum scans each index of its table
// whole, and vacuuming every second made the relay's p99 seconds long. Without it the
// e2e measured the development server's configuration rather than the
// suite: on 2026-11-26, with autovacuum off, transaction_outbox grew to
// 815 MB for 178k live rows (each row is inserted, claimed and settled), far
// beyond shared_buffers, and the relay's MarkProcessed, reading ~2,600
// blocks a call from outside shared_buffers, took 49% of Postgres's
// statement time (24 ms a call); with autovacuum on, 4% (0.3 ms a call:
// pg_stat_statements over the same e2e, docs/benchmarks.md). It does
// nothing when the server runs autovacuum itself. stop ends it and returns
// how many vacuums it ran.
func standInForAutovacuum(ctx context.Context, r *Runner, pool *pgxpool.Pool, label string) (stop func() int, err error) {
	off, err := autovacuumOff(ctx, pool)
	if err != nil || !off {
		return func() int { return 0 }, err
	}
	var naptime int // seconds
	if err := pool.QueryRow(ctx, "SELECT setting::int FROM pg_settings WHERE name = 'autovacuum_naptime'").Scan(&naptime); err != nil {
		return nil, fmt.Errorf("read the server's autovacuum_naptime: %w", err)
	}
	r.progress("%s: the server runs without autovacuum; every %d s, vacuuming each table autovacuum would have, while the suite runs", label, naptime)
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg   sync.WaitGroup
		runs int
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
			rows, err := pool.Query(ctx, sqlVacuumDue)
			if err != nil {
				continue // cancelled, or the next tick asks again
			}
			tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				continue
			}
			for _, t := range tables {
				if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+t); err == nil {
					runs++
				}
			}
		}
	}()
	return func() int {
		cancel()
		wg.Wait()
		return runs
	}, nil
}
