package migrations

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverLockKey is the Postgres advisory lock the River step holds while it
// migrates: golang-migrate's own lock covers only our SQL files, and two
// replicas (or two e2e processes) migrating one database at once must not
// both create River's tables. Any constant works as long as nothing else
// uses it; this one is "aegisrvr" in ASCII.
const riverLockKey int64 = 0x6165676973727672

// riverTimeout bounds the River step: it runs at process start, where a
// hung migration must fail the start rather than hang it.
const riverTimeout = 2 * time.Minute

// riverUp applies River's own migrations (its job, leader and queue tables,
// in schema public) to the database at databaseURL. It runs before our SQL
// files so that 000017 can grant River's tables to the roles that work
// jobs. Idempotent: applied versions are recorded in river_migration.
func riverUp(databaseURL string) error {
	return withRiver(databaseURL, func(ctx context.Context, m *rivermigrate.Migrator[pgx.Tx]) error {
		if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("apply River migrations: %w", err)
		}
		return nil
	})
}

// riverDown removes River's schema entirely (tests prove Down reverses Up).
func riverDown(databaseURL string) error {
	return withRiver(databaseURL, func(ctx context.Context, m *rivermigrate.Migrator[pgx.Tx]) error {
		if _, err := m.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1}); err != nil {
			return fmt.Errorf("revert River migrations: %w", err)
		}
		return nil
	})
}

// withRiver runs fn with a River migrator over a one-connection pool that
// holds riverLockKey: the migrator's statements run on the locked
// connection, and a second migrator of the same database waits.
func withRiver(databaseURL string, fn func(context.Context, *rivermigrate.Migrator[pgx.Tx]) error) error {
	// Up and Down take no context (golang-migrate's API does not); riverTimeout
	// bounds the River step instead.
	ctx, cancel := context.WithTimeout(context.Background(), riverTimeout)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("parse database URL for River migrations: %w", err)
	}
	cfg.MinConns, cfg.MaxConns = 0, 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect for River migrations: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `SELECT pg_advisory_lock($1)`, riverLockKey); err != nil {
		return fmt.Errorf("lock for River migrations: %w", err)
	}
	// Unlock on the same connection (the pool has one); closing the pool
	// would release it anyway.
	defer func() { _, _ = pool.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, riverLockKey) }()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{
		// Each applied version is logged at info; the callers (migrate,
		// service start) report the resulting version themselves.
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return fmt.Errorf("create River migrator: %w", err)
	}
	return fn(ctx, m)
}
