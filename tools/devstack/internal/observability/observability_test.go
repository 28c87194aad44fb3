package observability_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const root = "../../../.."

// definedMetrics collects the metric names defined in non-test Go code under
// services/ and pkg/: every prometheus.CounterOpts, GaugeOpts, HistogramOpts
// and SummaryOpts literal with a constant Name (and Namespace/Subsystem):
// a string literal, or a string constant declared in the same file.
func definedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, dir := range []string{"services", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			consts := fileStringConsts(f)
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				sel, ok := lit.Type.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				kind := strings.TrimSuffix(sel.Sel.Name, "Opts")
				if kind == sel.Sel.Name || (kind != "Counter" && kind != "Gauge" && kind != "Histogram" && kind != "Summary") {
					return true
				}
				parts := map[string]string{}
				for _, el := range lit.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key, ok1 := kv.Key.(*ast.Ident)
					if id, isIdent := kv.Value.(*ast.Ident); ok1 && isIdent {
						if c, known := consts[id.Name]; known {
							parts[key.Name] = c
						}
						continue
					}
					val, ok2 := kv.Value.(*ast.BasicLit)
					if ok1 && ok2 && val.Kind == token.STRING {
						s, err := strconv.Unquote(val.Value)
						if err == nil {
							parts[key.Name] = s
						}
					}
				}
				if parts["Name"] == "" {
					return true
				}
				var full []string
				for _, p := range []string{parts["Namespace"], parts["Subsystem"], parts["Name"]} {
					if p != "" {
						full = append(full, p)
					}
				}
				name := strings.Join(full, "_")
				names[name] = true
				if kind == "Histogram" || kind == "Summary" {
					names[name+"_sum"], names[name+"_count"] = true, true
					if kind == "Histogram" {
						names[name+"_bucket"] = true
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	return names
}

// fileStringConsts are the string constants declared at the top of f.
func fileStringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					break
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						out[name.Name] = v
					}
				}
			}
		}
	}
	return out
}

var metricRef = regexp.MustCompile(`\baegis_[a-z0-9_]+`)

func undefined(defined map[string]bool, exprs map[string]string) []string {
	var missing []string
	for where, expr := range exprs {
		for _, m := range metricRef.FindAllString(expr, -1) {
			if !defined[m] {
				missing = append(missing, where+": "+m)
			}
		}
	}
	sort.Strings(missing)
	return missing
}

func TestTheMetricScanFindsWhatTheServicesDefine(t *testing.T) {
	t.Parallel()
	defined := definedMetrics(t)
	require.Greater(t, len(defined), 40)
	for _, m := range []string{"aegis_outbox_pending", "aegis_http_request_duration_seconds_bucket", "aegis_psp_calls_total", "aegis_dlq_depth"} {
		require.True(t, defined[m], m)
	}
	require.False(t, defined["aegis_outbox_pending_bucket"], "a gauge has no buckets")
	require.Equal(t, []string{"x: aegis_no_such_metric"}, undefined(defined, map[string]string{"x": "rate(aegis_no_such_metric[5m]) + aegis_outbox_pending"}))
}

type dashboard struct {
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func TestDashboardQueriesUseDefinedMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(root, "deploy/observability/grafana/dashboards/aegis.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	require.Equal(t, "aegis-overview", d.UID)
	exprs := map[string]string{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		require.False(t, ids[p.ID], "panel id %d used twice", p.ID)
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		require.NotNil(t, p.Datasource, p.Title)
		require.Equal(t, "prometheus", p.Datasource.UID, "%s: the provisioned datasource's uid", p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for i, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, p.Title)
			exprs[p.Title+"#"+strconv.Itoa(i)] = tg.Expr
		}
	}
	require.Greater(t, len(exprs), 20)
	require.Empty(t, undefined(definedMetrics(t), exprs), "dashboard panels query metrics no service defines")
}

func TestAlertRulesUseDefinedMetrics(t *testing.T) {
	t.Parallel()
	matches, err := filepath.Glob(filepath.Join(root, "services/*/alerts/*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, matches)
	exprs := map[string]string{}
	expr := regexp.MustCompile(`(?m)^\s*expr:\s*(.+)$`)
	for _, f := range matches {
		if strings.HasSuffix(f, ".test.yml") {
			continue
		}
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, m := range expr.FindAllStringSubmatch(string(raw), -1) {
			exprs[filepath.Base(f)+"#"+strconv.Itoa(i)] = m[1]
		}
	}
	require.NotEmpty(t, exprs)
	require.Empty(t, undefined(definedMetrics(t), exprs), "alert rules query metrics no service defines")
}
