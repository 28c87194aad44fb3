package bench

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// runPgbench runs script with pgbench against url for d with clients
// clients and returns its transactions per second. extra adds flags
// (-M prepared for pipelined scripts).
func runPgbench(ctx context.Context, url, script string, clients int, d time.Duration, extra ...string) (float64, error) {
	dir, err := os.MkdirTemp("", "aegis-bench")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "script.sql")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		return 0, err
	}
	return pgbenchTPS(ctx, url, path, clients, d, extra...)
}

// pgbenchTPS runs the script file at path and returns pgbench's
// transactions per second. On a busy machine Postgres may be short of
// connections for a moment (another scenario's processes letting theirs
// go), or connecting all the clients may take the whole run: it tries
// again, a few times.
func pgbenchTPS(ctx context.Context, url, path string, clients int, d time.Duration, extra ...string) (float64, error) {
	tpsRE := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	args := append([]string{"-n", "-c", strconv.Itoa(clients), "-j", "2", "-T", strconv.Itoa(max(1, int(d.Seconds())))}, extra...)
	args = append(args, "-f", path, url)
	for attempt := 1; ; attempt++ {
		out, err := exec.CommandContext(ctx, "pgbench", args...).CombinedOutput()
		m := tpsRE.FindSubmatch(out)
		switch {
		case err == nil && m != nil:
			return strconv.ParseFloat(string(m[1]), 64)
		case attempt < 5 && (strings.Contains(string(out), "too many clients") || (err == nil && m == nil)):
			time.Sleep(2 * time.Second)
		case err != nil:
			return 0, fmt.Errorf("pgbench: %w\n%s", err, out)
		default:
			return 0, fmt.Errorf("pgbench output without tps:\n%s", out)
		}
	}
}

// bareBaseline measures the bare two-table pgbench rate the ingest figures
// compare the suite with (ingest's bare baseline: the two rows a webhook costs,
// without our schema's indexes, constraints and triggers), benchClients
// clients.
func (r *Runner) bareBaseline(ctx context.Context, d time.Duration) (float64, error) {
	p, cleanup, err := r.newBarePgbench(ctx)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	return p.run(ctx, d)
}

// creditStatements are the payout worker's credit batch (ledger.CreditOnce,
// settlement delay 0 as by default), in the order it queues them: the
// names of their generated methods in the ledger's sqlcdb package.
var creditStatements = []string{"CreditClaim", "CreditWallet", "CreditEntries", "Repay"}

// creditParams are pgbench expressions for each statement's parameters, by
// the name of the field of its generated Params struct; the generated call
// says which is $1, $2, …. :client_id and :n (a random number per
// transaction) make the ids unique; the transaction id is a UUID derived
// from them (the worker makes a UUIDv7 in Go: no extra round trip either).
var creditParams = func() map[string]map[string]string {
	// Each :variable is its own untyped parameter: cast it where the
	// statement alone does not tell Postgres its type.
	id := "CAST(:client_id AS text) || '_' || CAST(:n AS text)"
	txID := "md5(" + id + ")::uuid"
	user := "'user-' || CAST(CAST(:n AS bigint) % 5000 AS text)"
	// pgbench takes :name for a variable even inside a literal: no colon
	// before a letter in the text.
	ref := "'stripe' || ':' || 'pi_' || " + id
	return map[string]map[string]string{
		"CreditClaim": {"ConsumerGroup": "'payout-worker-bench'", "EventID": "'evt_' || " + id, "TxID": txID,
			"Reference": ref, "CorrelationID": "''"},
		"CreditWallet": {"TxID": txID, "UserID": user, "Currency": "'usd'", "Amount": "1000"},
		"CreditEntries": {"TxID": txID, "UserID": user, "Currency": "'usd'", "Amount": "1000",
			"ClearingID": "CAST(:clearing AS bigint)"},
		"Repay": {"UserID": user, "Currency": "'usd'", "Reference": "'credit:' || " + ref, "CorrelationID": "''",
			"CreditTx": txID},
	}
}()

// creditScript builds the pgbench script of one wallet credit from the
// worker's own SQL (the sqlc-generated
// services/payout-worker/internal/ledger/sqlcdb/queries.sql.go, read from
// the source tree so the baseline cannot drift from the code): the same
// statements in one pipeline and one implicit transaction, as pgx sends
// CreditOnce's batch. Run it with -M prepared (pgx prepares too).
func creditScript(repo string, clearingID int64) (string, error) {
	path := filepath.Join(repo, "services", "payout-worker", "internal", "ledger", "sqlcdb", "queries.sql.go")
	stmts, err := generatedStatements(path)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("\\set n random(1, 1000000000000)\n")
	fmt.Fprintf(&b, "\\set clearing %d\n", clearingID)
	b.WriteString("\\startpipeline\n")
	param := regexp.MustCompile(`\$([0-9]+)`)
	for _, name := range creditStatements {
		st, ok := stmts[name]
		if !ok {
			return "", fmt.Errorf("%s: no method %s (the credit batch changed: update creditStatements)", path, name)
		}
		values := creditParams[name]
		var bad error
		sql := param.ReplaceAllStringFunc(st.sql, func(p string) string {
			i, _ := strconv.Atoi(p[1:])
			if i < 1 || i > len(st.args) {
				bad = fmt.Errorf("%s uses %s; its call passes %d arguments", name, p, len(st.args))
				return p
			}
			v, ok := values[st.args[i-1]]
			if !ok {
				bad = fmt.Errorf("%s's %s (%s): not in creditParams", name, p, st.args[i-1])
			}
			return "(" + v + ")"
		})
		if bad != nil {
			return "", bad
		}
		// pgbench reads one statement per line unless it ends in ';' on
		// its own: drop the comment lines and flatten each statement onto
		// one line.
		var lines []string
		for _, l := range strings.Split(sql, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		b.WriteString(strings.Join(strings.Fields(strings.Join(lines, "\n")), " ") + ";\n")
	}
	b.WriteString("\\endpipeline\n")
	return b.String(), nil
}

// statement is one sqlc-generated statement: its text and the Params
// fields its method passes as $1, $2, … in order.
type statement struct {
	sql  string
	args []string
}

// generatedStatements reads a sqlc-generated queries file: each method's
// statement (the string constant it passes) and its arguments (arg.Field,
// or the method's own parameter name when it takes a single one).
func generatedStatements(path string) (map[string]statement, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	consts := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", path, n.Name, err)
				}
				consts[n.Name] = v
			}
		}
	}
	out := map[string]statement{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Body == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			id, ok := call.Args[1].(*ast.Ident)
			if !ok {
				return true
			}
			sql, ok := consts[id.Name]
			if !ok {
				return true
			}
			st := statement{sql: sql}
			for _, a := range call.Args[2:] {
				switch a := a.(type) {
				case *ast.SelectorExpr:
					st.args = append(st.args, a.Sel.Name)
				case *ast.Ident:
					st.args = append(st.args, a.Name)
				}
			}
			out[fn.Name.Name] = st
			return false
		})
	}
	return out, nil
}

// repoRoot finds the repository root (the directory with go.work) from the
// working directory up: `make bench` runs from it.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.work above the working directory: run the bench from the repository")
		}
		dir = parent
	}
}
