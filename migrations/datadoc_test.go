package migrations

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// dataDoc is the record of every table's data lifecycle, from this
// package's directory.
var dataDoc = filepath.Join("..", "docs", "data.md")

// dataDocHeader is the header row of docs/data.md's table of tables.
var dataDocHeader = []string{"table", "owner", "what it holds", "class", "retention today", "reason / what must outlive what"}

// dataClasses are the classes docs/data.md defines; a row's class cell is a
// comma-separated list of them.
var dataClasses = []string{"financial record", "dedupe key", "operational", "personal data"}

// dataDocRows parses the table of tables of a docs/data.md text: the
// Markdown table whose header is dataDocHeader. It returns each row's cells
// by table name (backquotes dropped), and an error for a missing table, a
// row with the wrong number of cells or an empty cell, an unknown class, or
// a table named twice.
func dataDocRows(text string) (map[string][]string, error) {
	cells := func(line string) []string {
		line = strings.TrimSpace(line)
		line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
		out := strings.Split(line, "|")
		for i := range out {
			out[i] = strings.TrimSpace(out[i])
		}
		return out
	}
	lines := strings.Split(text, "\n")
	start := -1
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "|") && slices.Equal(cells(line), dataDocHeader) {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no table with the header | %s |", strings.Join(dataDocHeader, " | "))
	}
	rows := map[string][]string{}
	for n, line := range lines[start+2:] {
		if !strings.HasPrefix(strings.TrimSpace(line), "|") {
			break
		}
		row := cells(line)
		if len(row) != len(dataDocHeader) {
			return nil, fmt.Errorf("row %d has %d cells, want %d (a | inside a cell?): %s", n+1, len(row), len(dataDocHeader), line)
		}
		name := strings.Trim(row[0], "`")
		for i, c := range row {
			if c == "" {
				return nil, fmt.Errorf("table %s: %q is empty", name, dataDocHeader[i])
			}
		}
		for _, class := range strings.Split(row[3], ",") {
			if !slices.Contains(dataClasses, strings.TrimSpace(class)) {
				return nil, fmt.Errorf("table %s: class %q is none of %v", name, strings.TrimSpace(class), dataClasses)
			}
		}
		if _, dup := rows[name]; dup {
			return nil, fmt.Errorf("table %s has two rows", name)
		}
		rows[name] = row
	}
	return rows, nil
}

// TestDataDocListsEveryTable fails when docs/data.md's table of tables has
// no row for a table of the migrated schema (ours and River's, all in
// schema public), or has a row for a table that does not exist.
func TestDataDocListsEveryTable(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile(dataDoc)
	if err != nil {
		t.Fatalf("read the data lifecycle record: %v", err)
	}
	rows, err := dataDocRows(string(text))
	if err != nil {
		t.Fatalf("%s: %v", dataDoc, err)
	}

	conn := connect(t, migrated(t))
	// A partition is its parent's rows, documented in the parent's row
	// (partition_policies says how its partitions come and go).
	r, err := conn.Query(context.Background(), `SELECT t.tablename FROM pg_tables t
		JOIN pg_class c ON c.oid = format('%I.%I', t.schemaname, t.tablename)::regclass
		WHERE t.schemaname = 'public' AND NOT c.relispartition ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tables, "river_job") || !slices.Contains(tables, "schema_migrations") {
		t.Fatalf("the migrated schema lacks River's or golang-migrate's tables: %v", tables)
	}
	for _, table := range tables {
		if _, ok := rows[table]; !ok {
			t.Errorf("%s has no row for table %s: add its owner, what it holds, class, retention and reason", dataDoc, table)
		}
	}
	for name := range rows {
		if !slices.Contains(tables, name) {
			t.Errorf("%s has a row for %s, which the migrations do not create", dataDoc, name)
		}
	}
}

func TestDataDocRows(t *testing.T) {
	t.Parallel()
	head := "| table | owner | what it holds | class | retention today | reason / what must outlive what |\n|---|---|---|---|---|---|\n"
	good := head + "| `a` | x | y | operational, dedupe key | never | z |\n| `b` | x | y | personal data | never | z |\n\nafter\n"
	rows, err := dataDocRows("# Doc\n\n" + good)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows["a"] == nil || rows["b"] == nil {
		t.Errorf("rows = %v, want a and b", rows)
	}
	for name, text := range map[string]string{
		"no table":       "# Doc\n",
		"other header":   "| table | owner |\n|---|---|\n| `a` | x |\n",
		"empty cell":     head + "| `a` | x |  | operational | never | z |\n",
		"missing cell":   head + "| `a` | x | y | operational | never |\n",
		"unknown class":  head + "| `a` | x | y | secret | never | z |\n",
		"duplicate row":  head + "| `a` | x | y | operational | never | z |\n| `a` | x | y | operational | never | z |\n",
		"pipe in a cell": head + "| `a` | x | y | z | operational | never | z |\n",
	} {
		if _, err := dataDocRows(text); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
