package database

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/rivershared/sqlctemplate"
)

// DBTX runs statements: a pool, a connection or a transaction (every
// sqlcdb.DBTX is this interface).
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Templated is a DBTX for statements with parts chosen at run time (a
// filter's conditions), as River's queries have: the statement stays in its
// queries.sql, compiled by sqlc, with a template where the part goes,
//
//	WHERE /* TEMPLATE_BEGIN: filters */ true /* TEMPLATE_END */
//
// and the caller puts the part, and the values of its @named parameters,
// in the context (WithTemplate). Templated replaces the template and
// numbers the named parameters after the generated ones before the
// statement runs (River's sqlctemplate). The parts are SQL text the caller
// builds from constants; every value goes as a parameter.
type Templated struct {
	db       DBTX
	replacer *sqlctemplate.Replacer
}

// NewTemplated returns a Templated running on db.
func NewTemplated(db DBTX) *Templated {
	return &Templated{db: db, replacer: &sqlctemplate.Replacer{}}
}

// WithTemplate returns ctx carrying the text of the template name and the
// values of the named parameters (without @) that text uses.
func WithTemplate(ctx context.Context, name, text string, args map[string]any) context.Context {
	return sqlctemplate.WithReplacements(ctx,
		map[string]sqlctemplate.Replacement{name: {Stable: true, Value: text}}, args)
}

func (t *Templated) render(ctx context.Context, sql string, args []any) (string, []any, error) {
	out, outArgs, err := t.replacer.RunSafely(ctx, "$", sql, args)
	if err != nil {
		return "", nil, fmt.Errorf("render statement template: %w", err)
	}
	return out, outArgs, nil
}

// Exec runs the rendered statement.
func (t *Templated) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	sql, args, err := t.render(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.db.Exec(ctx, sql, args...)
}

// Query runs the rendered statement.
func (t *Templated) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	sql, args, err := t.render(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	return t.db.Query(ctx, sql, args...)
}

// QueryRow runs the rendered statement; a template error comes back from
// Scan.
func (t *Templated) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	sql, args, err := t.render(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return t.db.QueryRow(ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
