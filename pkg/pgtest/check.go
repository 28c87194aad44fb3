package pgtest

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

var checkLiteral = regexp.MustCompile(`'((?:[^']|'')*)'::text`)

// CheckValues returns the values a CHECK (column IN (...)) constraint of the
// migrated schema allows in table.column, sorted, read back from
// pg_constraint: a Go list of domain words is tested against it so the two
// cannot drift. It fails t unless exactly one such constraint exists.
func (db *DB) CheckValues(t testing.TB, table, column string) []string {
	t.Helper()
	return CheckValues(t, db.Pool, table, column)
}

// Querier is what CheckValues reads through: a pool, a connection or a
// transaction (Tx).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// CheckValues is DB.CheckValues through q, such as a Tx.
func CheckValues(t testing.TB, q Querier, table, column string) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), `
		SELECT pg_get_constraintdef(c.oid)
		FROM pg_constraint c
		JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
		WHERE c.contype = 'c' AND c.conrelid = $1::regclass
		  AND cardinality(c.conkey) = 1 AND a.attname = $2
		  AND pg_get_constraintdef(c.oid) LIKE '%= ANY (ARRAY[%'`, table, column)
	if err != nil {
		t.Fatalf("pgtest: read CHECK constraints of %s.%s: %v", table, column, err)
	}
	var defs []string
	for rows.Next() {
		var def string
		if err := rows.Scan(&def); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		defs = append(defs, def)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if len(defs) != 1 {
		t.Fatalf("pgtest: %s.%s has %d CHECK (%s IN (...)) constraints, want 1: %q", table, column, len(defs), column, defs)
	}
	var values []string
	for _, m := range checkLiteral.FindAllStringSubmatch(defs[0], -1) {
		values = append(values, strings.ReplaceAll(m[1], "''", "'"))
	}
	slices.Sort(values)
	return values
}
