// Package migrations holds Aegis's Postgres schema as golang-migrate SQL files,
// embedded so that every binary can apply the schema it was built with.
//
// It is its own module because //go:embed cannot reach outside a module
// (services cannot embed ../../migrations), and every service and tool
// requires it through a replace directive.
//
// Each service connects as a role of its own (roles.go,
// 000016_service_roles): the migrator owns the tables and grants each role
// exactly what docs/design/architecture.md lists, so a service cannot write a table
// it does not own. The migration creates the roles NOLOGIN when they are
// missing, in a DO block that takes a concurrent CREATE ROLE's
// duplicate_object or unique_violation as done, rather than leaving them to
// be created outside the migrations: a fresh database (every test database,
// make dev's first start) then migrates with no step before it, and the
// migrator still holds no service's password. Making a role a login, with
// its password, is the deployment's step (EnableLogin, docker-compose's
// db-roles service, docs/operations/deploy.md). Down takes the grants back but leaves
// the roles: other databases of the cluster may still use them.
//
// River's schema (the job queue dlq-admin's background jobs run on,
// docs/design/architecture.md "Background jobs") is applied by Up too, from River's
// own migrator (river.go), before our SQL files: its tables then exist when
// 000017 grants them to the roles that work jobs, and one `migrate` (make
// dev, compose, every service start, every test database) applies both.
//
// Production's `migrate` runs UpGated (gate.go), which holds a contract
// migration (ContractMigrations: one the previous release's code cannot run
// on) back across one release; everything else (make dev, tests, chaos,
// bench) runs Up, which applies every migration.
//
// Errors from Up and Down never carry the database password: net/url and
// golang-migrate quote the URL in some of theirs, and `migrate` prints them.
package migrations

import (
	"embed"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers the pgx5:// driver
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// FS holds the migration files, named NNNNNN_title.{up,down}.sql.
//
//go:embed *.sql
var FS embed.FS

// Up applies every migration not yet applied to the database at databaseURL
// (a postgres:// URL) and reports the resulting version. golang-migrate holds
// a Postgres advisory lock while it runs, so replicas starting together are safe.
func Up(databaseURL string) (version uint, err error) {
	defer redactPassword(databaseURL, &err)
	if err := riverUp(databaseURL); err != nil {
		return 0, err
	}
	m, err := open(databaseURL)
	if err != nil {
		return 0, err
	}
	defer closeMigrate(m, &err)
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return 0, fmt.Errorf("apply migrations: %w", err)
	}
	v, dirty, err := m.Version()
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if dirty {
		return v, fmt.Errorf("schema version %d is dirty: a migration failed half-way; fix it by hand and force the version", v)
	}
	return v, nil
}

// UpTo applies River's schema and our migrations up to version and no
// further: tests start from an earlier schema (a table before the migration
// that changes it) and then Up while the code runs against it.
func UpTo(databaseURL string, version uint) (err error) {
	defer redactPassword(databaseURL, &err)
	if err := riverUp(databaseURL); err != nil {
		return err
	}
	m, err := open(databaseURL)
	if err != nil {
		return err
	}
	defer closeMigrate(m, &err)
	if err := m.Migrate(version); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("apply migrations up to %d: %w", version, err)
	}
	return nil
}

// Down reverts every migration. Production is forward-only; tests use this to
// prove each migration reverses cleanly.
func Down(databaseURL string) (err error) {
	defer redactPassword(databaseURL, &err)
	m, err := open(databaseURL)
	if err != nil {
		return err
	}
	defer closeMigrate(m, &err)
	if err := m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("revert migrations: %w", err)
	}
	return riverDown(databaseURL)
}

func open(databaseURL string) (*migrate.Migrate, error) {
	src, err := iofs.New(FS, ".")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	u, err := driverURL(databaseURL)
	if err != nil {
		return nil, err
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, u)
	if err != nil {
		return nil, fmt.Errorf("connect for migrations: %w", err)
	}
	return m, nil
}

func closeMigrate(m *migrate.Migrate, err *error) {
	srcErr, dbErr := m.Close()
	if *err == nil {
		*err = errors.Join(srcErr, dbErr)
	}
}

// driverURL turns a postgres:// URL into the pgx5:// form golang-migrate's
// pgx/v5 driver registers under.
func driverURL(databaseURL string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		// url.Parse quotes the whole URL, password included, in its error.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("parse database URL: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql", "pgx5":
		u.Scheme = "pgx5"
	default:
		return "", fmt.Errorf("database URL scheme %q: want postgres://", u.Scheme)
	}
	return u.String(), nil
}

// redactPassword replaces, in *err's text, the password of databaseURL as
// written, unescaped and escaped: net/url and golang-migrate quote the URL
// in some of their errors, and `migrate` prints its error. The chain stays
// (errors.Is and As still work), only the text changes.
func redactPassword(databaseURL string, err *error) {
	if *err == nil {
		return
	}
	var forms []string
	if u, perr := url.Parse(databaseURL); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			forms = append(forms, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	} else if _, rest, ok := strings.Cut(databaseURL, "://"); ok {
		// Unparsable: take what sits between the first ':' and the last
		// '@' of the authority as written.
		auth, _, _ := strings.Cut(rest, "/")
		if at := strings.LastIndex(auth, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(auth[:at], ":"); ok {
				forms = append(forms, pw)
				if dec, derr := url.QueryUnescape(pw); derr == nil {
					forms = append(forms, dec)
				}
			}
		}
	}
	msg := (*err).Error()
	for _, f := range forms {
		if f != "" {
			msg = strings.ReplaceAll(msg, f, "xxxxx")
		}
	}
	if msg != (*err).Error() {
		*err = &redactedError{msg: msg, err: *err}
	}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
