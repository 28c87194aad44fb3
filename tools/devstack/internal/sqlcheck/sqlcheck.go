package sqlcheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// sqlText matches a string that is a SQL statement (or a part of one that
// names its table): the keywords are matched in upper case, as every
// statement in the repository is written, so prose does not match.
var sqlText = []*regexp.Regexp{
	regexp.MustCompile(`\bSELECT\s[\s\S]*\bFROM\s`),
	regexp.MustCompile(`\bSELECT\s+(?:[a-z_]+\(|EXISTS\b|1\b|\$[0-9])`),
	regexp.MustCompile(`\bINSERT\s+INTO\s`),
	regexp.MustCompile(`\bUPDATE\s+[a-z_][a-z_0-9.]*(?:\s+[a-z_]+)?\s+SET\s`),
	regexp.MustCompile(`\bDELETE\s+FROM\s`),
	regexp.MustCompile(`\bWITH\s+[a-z_]+\s+AS\s*\(`),
	regexp.MustCompile(`\bTRUNCATE\s+[a-z_]`),
	// Fragments a statement is assembled from.
	regexp.MustCompile(`\bFROM\s+[a-z_][a-z_0-9]*\b`),
	regexp.MustCompile(`\bWHERE\s+(?:\(|NOT\s|[a-z_][a-z_0-9.]*\s*(?:=|<>|<|>|IN\b|IS\b|LIKE\b|@>|\?|$))`),
	regexp.MustCompile(`\bORDER\s+BY\s+[a-z_0-9(]`),
	regexp.MustCompile(`\bLIMIT\s+(?:\$|[0-9])`),
}

// LooksLikeSQL reports whether s reads as a SQL statement.
func LooksLikeSQL(s string) bool {
	for _, re := range sqlText {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// Finding is one offending string: where, and what it starts with.
type Finding struct {
	File string // slash-separated, relative to the repository root
	Line int
	Text string
}

func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Text) }

// GoFiles returns the non-test, non-generated .go files under dirs of root,
// slash-separated and relative to root.
func GoFiles(root string, dirs ...string) ([]string, error) {
	return files(root, dirs, func(path string) (bool, error) {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return false, nil
		}
		gen, err := generated(path)
		return !gen, err
	})
}

// QueriesFiles returns the queries.sql files under dirs of root,
// slash-separated and relative to root.
func QueriesFiles(root string, dirs ...string) ([]string, error) {
	return files(root, dirs, func(path string) (bool, error) { return filepath.Base(path) == "queries.sql", nil })
}

// files returns the files under dirs of root that keep takes,
// slash-separated, relative to root and sorted.
func files(root string, dirs []string, keep func(path string) (bool, error)) ([]string, error) {
	var out []string
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if ok, err := keep(path); err != nil || !ok {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", d, err)
		}
	}
	slices.Sort(out)
	return out, nil
}

// generated reports whether a Go file says it is generated (sqlc's code).
func generated(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	head, _, _ := bytes.Cut(b, []byte("\npackage "))
	return bytes.Contains(head, []byte("Code generated")) && bytes.Contains(head, []byte("DO NOT EDIT")), nil
}

// StringLiterals returns the string literals of a Go file for which match
// is true.
func StringLiterals(root, file string, match func(string) bool) ([]Finding, error) {
	return literals(root, file, func(_ *ast.File) func(*ast.BasicLit, string) bool {
		return func(_ *ast.BasicLit, s string) bool { return match(s) }
	})
}

// heading is a string a table's header row is made of: upper-case words.
var heading = regexp.MustCompile(`^[A-Z][A-Z ]*$`)

// StateLiterals returns the string literals of a Go file that spell one of
// states, except in a header row: a call whose string arguments are all
// upper-case words, some of them not states ("ID", "STATUS", "FAILED"),
// names columns, not payout states.
func StateLiterals(root, file string, states []string) ([]Finding, error) {
	return literals(root, file, func(f *ast.File) func(*ast.BasicLit, string) bool {
		headers := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var lits []*ast.BasicLit
			other := false
			for _, a := range call.Args {
				lit, ok := a.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil || !heading.MatchString(s) {
					return true
				}
				other = other || !slices.Contains(states, s)
				lits = append(lits, lit)
			}
			if len(lits) >= 2 && other {
				for _, l := range lits {
					headers[l] = true
				}
			}
			return true
		})
		return func(lit *ast.BasicLit, s string) bool { return !headers[lit] && slices.Contains(states, s) }
	})
}

// literals returns the string literals of a Go file that the function
// prepare returns for the parsed file matches.
func literals(root, file string, prepare func(*ast.File) func(*ast.BasicLit, string) bool) ([]Finding, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	match := prepare(f)
	var out []Finding
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil || !match(lit, s) {
			return true
		}
		text := strings.Join(strings.Fields(s), " ")
		if len(text) > 60 {
			text = text[:60] + "…"
		}
		out = append(out, Finding{File: file, Line: fset.Position(lit.Pos()).Line, Text: text})
		return true
	})
	return out, nil
}

// QuotedIn returns the lines of a SQL file that hold one of words as a
// quoted literal ('WORD'), as findings.
func QuotedIn(root, file string, words []string) ([]Finding, error) {
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	var out []Finding
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		for _, w := range words {
			if strings.Contains(line, "'"+w+"'") {
				out = append(out, Finding{File: file, Line: i + 1, Text: strings.TrimSpace(line)})
				break
			}
		}
	}
	return out, nil
}

// unreplaced is a named parameter sqlc left in a generated statement
// (it does after a unary minus: -@amount): Postgres would read it as the
// prefix operator @ on a column of that name.
var unreplaced = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:@'])@[a-z_][a-z_0-9]*`)

// UnreplacedParameters returns the generated files' statements that still
// hold an @name after sqlc's rewrite.
func UnreplacedParameters(root string, dirs ...string) ([]Finding, error) {
	gen, err := files(root, dirs, func(path string) (bool, error) { return strings.HasSuffix(path, ".sql.go"), nil })
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, f := range gen {
		found, err := StringLiterals(root, f, func(s string) bool {
			return strings.HasPrefix(s, "-- name: ") && unreplaced.MatchString(s)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}
