package sqlcheck_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/tools/devstack/internal/sqlcheck"
)

// sqlAllowed are the files whose string literals may hold SQL, each with
// its reason. A file not listed fails: its statements belong in its
// package's queries.sql.
var sqlAllowed = map[string]string{
	// Test support: it builds and inspects the test databases (the
	// template's advisory lock and existence, a CHECK constraint's values);
	// it runs no statement of the product.
	"pkg/pgtest/check.go":  "test support: reads CHECK constraints from pg_constraint",
	"pkg/pgtest/pgtest.go": "test support: the template database's lock and existence",
}

// stateAllowed are the files that may spell a payout state, each with its
// reason (pkg/payoutstate itself always may).
var stateAllowed = map[string]string{
	// The payout store: SweepCandidates names SENT_TO_GATEWAY and
	// AWAITING_RESPONSE so that the planner can prove the predicate of the
	// partial index payouts_status_idx (a parameter, under a generic plan,
	// would lose it); BeginCreate's SENDING_TO_GATEWAY and RetryDue's
	// RETRYING go to parameters with the store's current rework.
	"services/payout-worker/internal/payout/queries.sql": "payout store: a partial index's predicate; two with its rework",
	// dlq-admin's ledger check: UnfinishedHolds and AccountTotals write
	// out the states that are not finished (and those holding money) so
	// that the planner can prove the predicate of the partial index
	// payouts_status_since_idx (status NOT IN ('SUCCEEDED', 'FINALIZED'));
	// a parameter, under a generic plan, would lose it and scan every
	// finished payout.
	"services/dlq-admin/internal/integrity/recon/queries.sql": "ledger check: a partial index's predicate",
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

func TestNoSQLOutsideQueriesFiles(t *testing.T) {
	r := root(t)
	files, err := sqlcheck.GoFiles(r, "services", "pkg")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		found, err := sqlcheck.StringLiterals(r, f, sqlcheck.LooksLikeSQL)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) > 0 {
			seen[f] = true
		}
		if _, ok := sqlAllowed[f]; ok {
			continue
		}
		for _, x := range found {
			t.Errorf("SQL outside a queries.sql file (move it to its package's queries.sql, sqlc.yaml): %s", x)
		}
	}
	for f := range sqlAllowed {
		if !seen[f] {
			t.Errorf("%s is allowed SQL but has none (any more): take it off the allowlist", f)
		}
	}
}

func TestNoPayoutStateOutsideItsPackage(t *testing.T) {
	r := root(t)
	states := payoutstate.Names(payoutstate.Status.Valid)
	files, err := sqlcheck.GoFiles(r, "services", "pkg")
	if err != nil {
		t.Fatal(err)
	}
	var found []sqlcheck.Finding
	for _, f := range files {
		if strings.HasPrefix(f, "pkg/payoutstate/") {
			continue
		}
		lits, err := sqlcheck.StateLiterals(r, f, states)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, lits...)
	}
	sqlFiles, err := sqlcheck.QueriesFiles(r, "services", "pkg")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sqlFiles {
		lits, err := sqlcheck.QuotedIn(r, f, states)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, lits...)
	}
	seen := map[string]bool{}
	for _, x := range found {
		seen[x.File] = true
		if _, ok := stateAllowed[x.File]; !ok {
			t.Errorf("a payout state spelled outside pkg/payoutstate (use its constants; in SQL, a parameter): %s", x)
		}
	}
	for f := range stateAllowed {
		if !seen[f] {
			t.Errorf("%s is allowed payout states but spells none (any more): take it off the allowlist", f)
		}
	}
}

// sqlc leaves @name in place after a unary minus (-@amount), which
// Postgres would run as the prefix operator @ on a column: every generated
// statement must hold only $n.
func TestGeneratedStatementsKeepNoNamedParameter(t *testing.T) {
	found, err := sqlcheck.UnreplacedParameters(root(t), "services", "pkg")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range found {
		t.Errorf("sqlc left a named parameter in the statement (write sqlc.arg(name) there): %s", x)
	}
}

// The patterns find what they must and leave prose alone: a check that
// cannot fail is no check.
func TestLooksLikeSQL(t *testing.T) {
	for _, s := range []string{
		"SELECT id FROM wallets WHERE owner = $1",
		"SELECT pg_advisory_lock(1)",
		"SELECT EXISTS (SELECT 1 FROM x)",
		"INSERT INTO payouts (id) VALUES ($1)",
		"UPDATE payouts SET status = $2 WHERE id = $1",
		"UPDATE payouts p SET status = $2",
		"DELETE FROM processed_events WHERE at < $1",
		"WITH claim AS (INSERT INTO x VALUES (1) RETURNING 1) SELECT count(*) FROM claim",
		"\nFROM dead_letters\nWHERE ",
		" WHERE id = $1",
		" ORDER BY id LIMIT $",
	} {
		if !sqlcheck.LooksLikeSQL(s) {
			t.Errorf("not taken for SQL: %q", s)
		}
	}
	for _, s := range []string{
		"select a payout from the list",
		"the wallet cannot cover the debit",
		"payout %s: back in SENDING_TO_GATEWAY after it left it; not sent",
		"FROM", "SELECT",
		"update the ledger where needed",
	} {
		if sqlcheck.LooksLikeSQL(s) {
			t.Errorf("prose taken for SQL: %q", s)
		}
	}
}

// A header row that names a state among its columns is not a state; a
// state on its own, or among other states, is.
func TestStateLiteralsLeavesHeaderRowsAlone(t *testing.T) {
	dir := t.TempDir()
	src := "package x\n\nfunc f() {\n" +
		"\ttable(out, \"ID\", \"STATUS\", \"FAILED\")\n" +
		"\tuse(\"FAILED\")\n" +
		"\tuse(\"FAILED\", \"FINALIZED\")\n" +
		"\tfmt.Errorf(\"payout in %s\", \"FAILED\")\n" +
		"}\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	found, err := sqlcheck.StateLiterals(dir, "x.go", payoutstate.Names(payoutstate.Status.Valid))
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, f := range found {
		lines = append(lines, f.Line)
	}
	if want := []int{5, 6, 6, 7}; !slices.Equal(lines, want) {
		t.Fatalf("found states on lines %v, want %v (not the header row of line 4)", lines, want)
	}
}

func TestUnreplacedParametersFindsWhatSqlcLeft(t *testing.T) {
	dir := t.TempDir()
	gen := "// Code generated by sqlc. DO NOT EDIT.\n\npackage sqlcdb\n\n" +
		"const good = `-- name: Good :exec\nSELECT -$1::bigint, 'a@b', x::text, $2 @> $3`\n\n" +
		"const bad = `-- name: Bad :exec\nSELECT $1::uuid, -@amount::bigint`\n"
	if err := os.MkdirAll(filepath.Join(dir, "pkg", "sqlcdb"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pkg", "sqlcdb", "queries.sql.go"), []byte(gen), 0o600); err != nil {
		t.Fatal(err)
	}
	found, err := sqlcheck.UnreplacedParameters(dir, "pkg")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || !strings.Contains(found[0].Text, "Bad") {
		t.Fatalf("found %v, want the one statement with -@amount", found)
	}
}
