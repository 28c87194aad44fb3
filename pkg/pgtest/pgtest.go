package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/migrations"
)

// DefaultURL is used when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL is the server tests create their databases on.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// DB is a fresh migrated database.
type DB struct {
	// URL connects to the database (for binaries and migrations).
	URL  string
	Name string
	// Pool is a small pool on it, closed when the test ends.
	Pool *pgxpool.Pool
}

// New creates a migrated database for t and drops it when t ends.
func New(t testing.TB) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("pgtest: connect to %s (is Postgres running? make test starts it): %v", AdminURL(), err)
	}
	defer admin.Close(context.Background())

	tmpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := fmt.Sprintf("aegis_test_%d_%s", time.Now().UnixNano(), randSuffix(t.Name()))
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl)); err != nil {
		t.Fatalf("pgtest: create database from template: %v", err)
	}
	dbURL := withDatabase(AdminURL(), name)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.MaxConns = 6
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: open pool: %v", err)
	}
	if err := keepPartitions(ctx, pool); err != nil {
		pool.Close()
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return &DB{URL: dbURL, Name: name, Pool: pool}
}

// Tx begins a transaction for t on the shared database of the current
// migrations and rolls it back when t ends, as River's tests do: a store
// test whose code runs on one pgx.Tx (or a sqlc DBTX) costs a BEGIN instead
// of a CREATE DATABASE and a DROP. The shared database is made once per
// server and migration set from the template and kept; every test's writes
// vanish with its rollback, so it stays empty. Use pgx.Tx.Begin for a
// nested transaction (a savepoint).
//
// Tests that must commit (the relay, consumers, anything a second
// connection must see), need a pool or LISTEN, or hold locks other tests
// could wait on stay on New. Rows a test inserts on the shared database
// lock their unique keys until its rollback: parallel tests that insert the
// same key wait for each other, so keep keys distinct (t.Name() in them).
func Tx(t testing.TB) pgx.Tx {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := migrationsHash()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := "aegis_shared_" + h
	conn, err := pgx.Connect(ctx, withDatabase(AdminURL(), name))
	if err != nil {
		if err := ensureShared(ctx, name); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		if conn, err = pgx.Connect(ctx, withDatabase(AdminURL(), name)); err != nil {
			t.Fatalf("pgtest: connect to the shared database: %v", err)
		}
	}
	if err := keepPartitions(ctx, conn); err != nil {
		_ = conn.Close(context.Background())
		t.Fatalf("pgtest: %v", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		_ = conn.Close(context.Background())
		t.Fatalf("pgtest: begin: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The deferred constraints (a ledger transaction's balance) would
		// fire only at a commit that never comes: check them before the
		// rollback, as a commit would.
		var pgErr *pgconn.PgError
		if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL IMMEDIATE"); err != nil &&
			(!errors.As(err, &pgErr) || pgErr.Code != "25P02") { // 25P02: the test left it failed, on purpose or not
			t.Errorf("pgtest: the test's writes break a deferred constraint, which a commit would refuse: %v", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Errorf("pgtest: roll back the test's transaction: %v", err)
		}
		_ = conn.Close(ctx) // the rollback above is what mattered
	})
	return tx
}

// ensureShared creates the shared database name from the template unless it
// exists, under the template's lock.
func ensureShared(ctx context.Context, name string) error {
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return fmt.Errorf("connect to %s (is Postgres running? make test starts it): %w", AdminURL(), err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	tmpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(424242)"); err != nil {
		return fmt.Errorf("lock shared database creation: %w", err)
	}
	defer func() { _, _ = admin.Exec(context.Background(), "SELECT pg_advisory_unlock(424242)") }() //nolint:contextcheck // unlock even when ctx has expired
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up the shared database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl)); err != nil {
		return fmt.Errorf("create the shared database from the template: %w", err)
	}
	return nil
}

// ensureTemplate creates and migrates the template database for the current
// migrations once per server, under an advisory lock so that test binaries
// running in parallel do not race.
func ensureTemplate(ctx context.Context, admin *pgx.Conn) (string, error) {
	h, err := migrationsHash()
	if err != nil {
		return "", err
	}
	tmpl := "aegis_template_" + h
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(424242)"); err != nil {
		return "", fmt.Errorf("lock template creation: %w", err)
	}
	// Unlock even when ctx has expired: other test binaries wait on it.
	defer func() { _, _ = admin.Exec(context.Background(), "SELECT pg_advisory_unlock(424242)") }() //nolint:contextcheck // see above

	var ready bool
	err = admin.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", tmpl).Scan(&ready)
	if err != nil {
		return "", fmt.Errorf("look up template: %w", err)
	}
	if ready {
		return tmpl, nil
	}
	// A half-built template (a run killed mid-migration) is rebuilt.
	if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", tmpl)); err != nil {
		return "", fmt.Errorf("drop stale template: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+tmpl); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	if _, err := migrations.Up(withDatabase(AdminURL(), tmpl)); err != nil { //nolint:contextcheck // Up takes no context; it bounds its River step itself
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH IS_TEMPLATE true ALLOW_CONNECTIONS false", tmpl)); err != nil {
		return "", fmt.Errorf("seal template: %w", err)
	}
	return tmpl, nil
}

func migrationsHash() (string, error) {
	sum := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(sum, "%s\x00%d\x00", path, len(b))
		sum.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return hex.EncodeToString(sum.Sum(nil))[:12], nil
}

func withDatabase(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.Path = "/" + name
	return u.String()
}

func randSuffix(testName string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s%d", testName, time.Now().UnixNano())))
	return strings.ToLower(hex.EncodeToString(h[:4]))
}

// Listen LISTENs on channel from a connection of its own, closed when t
// ends, and returns a function that waits up to d for the next
// notification.
func (db *DB) Listen(t testing.TB, channel string) func(d time.Duration) error {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatalf("pgtest: listen: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatalf("pgtest: listen on %s: %v", channel, err)
	}
	return func(d time.Duration) error {
		wait, stop := context.WithTimeout(ctx, d)
		defer stop()
		_, err := conn.WaitForNotification(wait)
		return err
	}
}

// As returns a pool on the database as role (a service's role, made a
// login first), closed when t ends: a test of what a service may do runs
// with that service's grants, not the owner's.
func (db *DB) As(t testing.TB, role string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatalf("pgtest: connect as owner: %v", err)
	}
	defer conn.Close(context.Background())
	if err := migrations.EnableLogin(ctx, conn, role, ""); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.ConnConfig.User = role
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: open pool as %s: %v", role, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// AfterContract revokes in this database what the next release's contract
// migration revokes (migrations.ApplyContractNext): the previous release's
// table reads and writes that views and functions replaced. A test that
// then runs a service's code as its role (As) shows that the current
// release needs none of them. Table grants are per database: other tests'
// databases keep theirs.
func (db *DB) AfterContract(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := migrations.ApplyContractNext(ctx, db.Pool); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// keepPartitions makes the partitions of the tables kept by time partition
// (partition_policies) current, as the services' job does: a template or
// shared database migrated days ago has partitions only up to two weeks
// after that day, and a row past them would fail its insert.
func keepPartitions(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}) error {
	if _, err := q.Exec(ctx, "SELECT maintain_partitions(table_name) FROM partition_policies"); err != nil {
		return fmt.Errorf("keep partitions current: %w", err)
	}
	return nil
}

// Empty creates an empty database of its own (no migrations, no template)
// and returns its URL; it is dropped when t ends. For tests of the
// migrations themselves: a schema migrated step by step, as production's is.
func Empty(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer admin.Close(ctx)
	name := "aegis_empty_" + randSuffix(t.Name())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create %s: %v", name, err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), AdminURL())
		if err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(AdminURL(), name)
}
