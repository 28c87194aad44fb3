package migrations

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
)

// ContractMigration is a migration the previous release's code cannot run
// on: applied while a pod of that release still serves, it breaks it.
type ContractMigration struct {
	Version uint
	// Why names what breaks, for the log line that holds it.
	Why string
}

// ContractMigrations are the migrations UpGated holds back across one
// release. A held migration must be the last one (golang-migrate applies in
// order: nothing after it could apply while it waits), so each is
// renumbered to follow every other until it is applied
// (docs/design/data-lifecycle.md, docs/operations/deploy.md "Contract
// migrations").
func ContractMigrations() []ContractMigration {
	return []ContractMigration{{
		Version: 56,
		Why: "webhook_events becomes partitioned: the previous release's ingest inserts with " +
			"ON CONFLICT (provider, event_id), which has no unique index to infer on the partitioned table (its webhooks would answer 5xx)",
	}}
}

// gateLockKey serialises UpGated runs on a database ("aegisgat" in ASCII):
// the hold is read, recorded and acted on by one run at a time.
const gateLockKey int64 = 0x6165676973676174

// gateTimeout bounds the connection and the wait for the gate's lock (a
// second migrate waits for the first's run, as golang-migrate's lock does).
const gateTimeout = 10 * time.Minute

// The gate's bookkeeping. schema_contract_holds is the migrator's own, as
// golang-migrate's schema_migrations is, and created here rather than by a
// numbered migration: the held migration is always the last one, so a
// migration creating the table (000057) would come after it and could never
// apply before the hold it has to record. No service's role is granted it.
const (
	gateCreateSQL = `CREATE TABLE IF NOT EXISTS schema_contract_holds (
    version    bigint      PRIMARY KEY,
    held_by    text        NOT NULL,
    held_at    timestamptz NOT NULL DEFAULT now(),
    applied_by text,
    applied_at timestamptz
)`
	gateReadSQL    = `SELECT held_by, held_at FROM schema_contract_holds WHERE version = $1`
	gateHoldSQL    = `INSERT INTO schema_contract_holds (version, held_by) VALUES ($1, $2) ON CONFLICT (version) DO NOTHING`
	gateAppliedSQL = `INSERT INTO schema_contract_holds AS h (version, held_by, applied_by, applied_at) VALUES ($1, $2, $2, now())
ON CONFLICT (version) DO UPDATE SET applied_by = EXCLUDED.applied_by, applied_at = EXCLUDED.applied_at`
)

// Gate is how UpGated treats contract migrations.
type Gate struct {
	// Release is the running binary's release (pkg/buildinfo's version):
	// the one that first holds a contract migration, and the one a later
	// run must differ from to apply it. "dev" builds all share one release,
	// so they apply a held migration only with Contract.
	Release string
	// Contract applies every contract migration now: for an operator who
	// knows no pod of the previous release is left, and for dev builds.
	Contract bool
}

// Held is a contract migration UpGated left unapplied.
type Held struct {
	ContractMigration
	// By is the release that first held it, At when.
	By string
	At time.Time
}

// GateResult is what UpGated did.
type GateResult struct {
	// Version is the schema version afterwards.
	Version uint
	// Applied are the contract migrations this run applied.
	Applied []uint
	// Held is the contract migration this run stopped before, if any.
	Held *Held
	// Fresh is true when the database had no migration applied: no pod of
	// any release can be running on it, so nothing was held.
	Fresh bool
}

// UpGated is production's `migrate`: Up, except that it stops before an
// unapplied contract migration (ContractMigrations) until a release other
// than the one that first stopped before it runs. That release's rollout
// starts only once the holding release is fully running, and was built
// with the contract migration, so every pod then serving works on both
// schemas. The first release to stop before it is recorded in
// schema_contract_holds. A database with no migration applied gets
// everything (no previous release runs on it), as does g.Contract.
func UpGated(databaseURL string, g Gate) (res GateResult, err error) {
	defer redactPassword(databaseURL, &err)
	if g.Release == "" {
		return GateResult{}, errors.New("migrate: the release is required to hold contract migrations")
	}
	// The migrations themselves take no context (golang-migrate's API):
	// only the connection and the wait for the lock are bounded, so that a
	// long migration does not fail the gate's bookkeeping after it.
	ctx := context.Background()
	lockCtx, cancel := context.WithTimeout(ctx, gateTimeout)
	defer cancel()
	conn, err := pgx.Connect(lockCtx, databaseURL)
	if err != nil {
		return GateResult{}, fmt.Errorf("connect for the migration gate: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	// A session lock: released with the connection, whatever happens.
	if _, err := conn.Exec(lockCtx, `SELECT pg_advisory_lock($1)`, gateLockKey); err != nil {
		return GateResult{}, fmt.Errorf("migration gate lock: %w", err)
	}
	if _, err := conn.Exec(ctx, gateCreateSQL); err != nil {
		return GateResult{}, fmt.Errorf("create schema_contract_holds: %w", err)
	}
	if err := riverUp(databaseURL); err != nil {
		return GateResult{}, err
	}
	m, err := open(databaseURL)
	if err != nil {
		return GateResult{}, err
	}
	defer closeMigrate(m, &err)
	versions, err := sourceVersions()
	if err != nil {
		return GateResult{}, err
	}

	cur, dirty, err := m.Version()
	switch {
	case errors.Is(err, migrate.ErrNilVersion):
		res.Fresh = true
	case err != nil:
		return GateResult{}, fmt.Errorf("read schema version: %w", err)
	case dirty:
		return GateResult{}, fmt.Errorf("schema version %d is dirty: a migration failed half-way; fix it by hand and force the version", cur)
	}
	for {
		next, ok := nextContract(versions, cur)
		if !ok || res.Fresh {
			if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
				return res, fmt.Errorf("apply migrations: %w", err)
			}
			break
		}
		var by string
		var at time.Time
		switch err := conn.QueryRow(ctx, gateReadSQL, next.Version).Scan(&by, &at); {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return res, fmt.Errorf("read the hold of migration %d: %w", next.Version, err)
		}
		if g.Contract || (by != "" && by != g.Release) {
			if err := m.Migrate(next.Version); err != nil && !errors.Is(err, migrate.ErrNoChange) {
				return res, fmt.Errorf("apply migrations up to contract migration %d: %w", next.Version, err)
			}
			if _, err := conn.Exec(ctx, gateAppliedSQL, next.Version, g.Release); err != nil {
				return res, fmt.Errorf("record contract migration %d applied: %w", next.Version, err)
			}
			res.Applied = append(res.Applied, next.Version)
			cur = next.Version
			continue
		}
		if by == "" {
			if _, err := conn.Exec(ctx, gateHoldSQL, next.Version, g.Release); err != nil {
				return res, fmt.Errorf("record the hold of migration %d: %w", next.Version, err)
			}
			if err := conn.QueryRow(ctx, gateReadSQL, next.Version).Scan(&by, &at); err != nil {
				return res, fmt.Errorf("read the hold of migration %d: %w", next.Version, err)
			}
		}
		if before := versionBefore(versions, next.Version); before > cur {
			if err := m.Migrate(before); err != nil && !errors.Is(err, migrate.ErrNoChange) {
				return res, fmt.Errorf("apply migrations up to %d: %w", before, err)
			}
		}
		res.Held = &Held{ContractMigration: next, By: by, At: at}
		break
	}
	v, dirty, err := m.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return res, fmt.Errorf("read schema version: %w", err)
	}
	if dirty {
		return res, fmt.Errorf("schema version %d is dirty: a migration failed half-way; fix it by hand and force the version", v)
	}
	res.Version = v
	return res, nil
}

// nextContract returns the first contract migration after cur that the
// embedded files hold.
func nextContract(versions []uint, cur uint) (ContractMigration, bool) {
	var found []ContractMigration
	for _, c := range ContractMigrations() {
		if c.Version > cur && slices.Contains(versions, c.Version) {
			found = append(found, c)
		}
	}
	if len(found) == 0 {
		return ContractMigration{}, false
	}
	return slices.MinFunc(found, func(a, b ContractMigration) int { return int(a.Version) - int(b.Version) }), true
}

// versionBefore returns the embedded migration just before v (0: none).
func versionBefore(versions []uint, v uint) uint {
	var before uint
	for _, x := range versions {
		if x < v {
			before = max(before, x)
		}
	}
	return before
}

// sourceVersions lists the embedded migrations' versions in order.
func sourceVersions() ([]uint, error) {
	src, err := iofs.New(FS, ".")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	defer src.Close()
	var out []uint
	v, err := src.First()
	for err == nil {
		out = append(out, v)
		v, err = src.Next(v)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list embedded migrations: %w", err)
	}
	return out, nil
}
