package observability_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

const root = "../../../.."

// definedMetrics collects the metric names defined in non-test Go code under
// services/ and pkg/: every prometheus.CounterOpts, GaugeOpts, HistogramOpts
// and SummaryOpts literal with a constant Name (and Namespace/Subsystem):
// a string literal, or a string constant declared in the same file; every
// prometheus.NewDesc whose name is such a constant (a Collector's metrics,
// counted as gauges or counters); and the Kafka client metrics the franz-go
// plugin defines for kafkax.Metrics (kafkaClientMetrics).
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
				if name, ok := newDescName(n, consts); ok {
					names[name] = true
					return true
				}
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
	for name := range kafkaClientMetrics(t) {
		names[name] = true
	}
	return names
}

// newDescName is the metric name of a prometheus.NewDesc call whose first
// argument is a string literal or a constant of the file.
func newDescName(n ast.Node, consts map[string]string) (string, bool) {
	call, ok := n.(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "NewDesc" {
		return "", false
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" {
		return "", false
	}
	switch a := call.Args[0].(type) {
	case *ast.Ident:
		c, ok := consts[a.Name]
		return c, ok && c != ""
	case *ast.BasicLit:
		v, err := strconv.Unquote(a.Value)
		return v, err == nil && a.Kind == token.STRING && v != ""
	}
	return "", false
}

// capture is a registerer that keeps what is registered on it.
type capture struct{ cs []prometheus.Collector }

func (c *capture) Register(x prometheus.Collector) error   { c.cs = append(c.cs, x); return nil }
func (c *capture) MustRegister(xs ...prometheus.Collector) { c.cs = append(c.cs, xs...) }
func (c *capture) Unregister(prometheus.Collector) bool    { return true }

var descName = regexp.MustCompile(`fqName: "([a-z0-9_]+)"`)

// kafkaClientMetrics are the metrics a Kafka client made with kafkax.Metrics
// registers (franz-go's kprom, defined in its code, not ours): read from the
// collectors themselves when a client is made (no broker is contacted), a
// histogram with its _bucket/_sum/_count series.
func kafkaClientMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := &capture{}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kafkax.Metrics(reg, "probe", slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer cl.Close()
	names := map[string]bool{}
	for _, c := range reg.cs {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descName.FindStringSubmatch(d.String())
			require.NotNil(t, m, d.String())
			names[m[1]] = true
			if _, ok := c.(*prometheus.HistogramVec); ok {
				names[m[1]+"_bucket"], names[m[1]+"_sum"], names[m[1]+"_count"] = true, true, true
			}
		}
	}
	require.NotEmpty(t, names)
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
	for _, m := range []string{"aegis_outbox_pending", "aegis_http_request_duration_seconds_bucket", "aegis_psp_calls_total", "aegis_dlq_depth",
		"aegis_db_pool_acquired_conns", "aegis_psp_call_seconds_bucket", "aegis_kafka_write_errors_total",
		"aegis_kafka_request_duration_e2e_seconds_bucket"} {
		require.True(t, defined[m], m)
	}
	require.False(t, defined["aegis_outbox_pending_bucket"], "a gauge has no buckets")
	require.False(t, defined["aegis_kafka_write_errors_total_bucket"], "a counter has no buckets")
	require.Equal(t, []string{"x: aegis_no_such_metric"}, undefined(defined, map[string]string{"x": "rate(aegis_no_such_metric[5m]) + aegis_outbox_pending"}))
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasourceRef  `json:"datasource"`
			Multi      bool            `json:"multi"`
			IncludeAll bool            `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []struct {
		Expr         string         `json:"expr"`
		LegendFormat string         `json:"legendFormat"`
		Datasource   *datasourceRef `json:"datasource"`
	} `json:"targets"`
}

// triagePanels are the panels an on-call engineer opens the dashboard for
// (docs/operations/alerts.md, "Dashboards").
var triagePanels = []string{
	"Consumer lag by group, topic and partition",
	"Stalled partitions (1 = stalled)",
	"Oldest unfinished payout by state",
	"Outbound deliveries pending by endpoint",
	"Oldest pending outbound delivery by endpoint",
	"PSP call latency p50/p99 by provider and operation",
	"PSP call errors/s by provider, operation and class",
	"Connections in use / max by service",
	"Acquires waiting/s by service",
	"Kafka produce/fetch errors/s by service",
	"Requests/s by service and status",
	"Requests/s by pod",
}

var (
	jobLabel = regexp.MustCompile(`\bjob\b`)
	// aegisSelector is an aegis_* metric with its label matchers, if any.
	aegisSelector = regexp.MustCompile(`\baegis_[a-z0-9_]+(\{[^}]*\})?`)
)

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "deploy/observability/grafana/dashboards/aegis.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	require.Equal(t, "aegis-overview", d.UID)
	return d
}

func TestDashboardQueriesUseDefinedMetrics(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	exprs := map[string]string{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		require.False(t, ids[p.ID], "panel id %d used twice", p.ID)
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, p.Title)
		for i, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, p.Title)
			exprs[p.Title+"#"+strconv.Itoa(i)] = tg.Expr
		}
	}
	require.Greater(t, len(exprs), 40)
	require.Empty(t, undefined(definedMetrics(t), exprs), "dashboard panels query metrics no service defines")
}

// The datasource is the dashboard's ${datasource} variable, in every panel
// and every query: the dashboard imports into any Grafana, whatever its
// Prometheus datasource is called.
func TestDashboardDatasourceIsAVariable(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	vars := map[string]int{}
	for i, v := range d.Templating.List {
		vars[v.Name] = i
	}
	require.Contains(t, vars, "datasource")
	ds := d.Templating.List[vars["datasource"]]
	require.Equal(t, "datasource", ds.Type)
	require.JSONEq(t, `"prometheus"`, string(ds.Query), "a datasource variable over Prometheus datasources")
	want := datasourceRef{Type: "prometheus", UID: "${datasource}"}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotNil(t, p.Datasource, p.Title)
		require.Equal(t, want, *p.Datasource, p.Title)
		for _, tg := range p.Targets {
			require.NotNil(t, tg.Datasource, p.Title)
			require.Equal(t, want, *tg.Datasource, p.Title)
		}
	}
	for _, name := range []string{"service", "pod"} {
		require.Contains(t, vars, name)
		v := d.Templating.List[vars[name]]
		require.Equal(t, "query", v.Type, name)
		require.True(t, v.Multi && v.IncludeAll, "%s: several or all", name)
		require.NotNil(t, v.Datasource, name)
		require.Equal(t, want, *v.Datasource, name)
	}
}

// Series are selected by the service and pod labels the scrape config sets
// (compose: static labels; Kubernetes: relabelled from the pod), never by
// job, which is one per scrape config on Kubernetes and would merge every
// service into one series. Every aegis_* selector is filtered by the
// service variable.
func TestDashboardSelectsByServiceAndPodNeverJob(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	for _, v := range d.Templating.List {
		require.NotRegexp(t, jobLabel, v.Definition, v.Name)
		require.NotRegexp(t, jobLabel, string(v.Query), v.Name)
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			require.NotRegexp(t, jobLabel, tg.Expr, p.Title)
			require.NotRegexp(t, jobLabel, tg.LegendFormat, p.Title)
			for _, sel := range aegisSelector.FindAllString(tg.Expr, -1) {
				require.Contains(t, sel, `service=~"$service"`, "%s: %s", p.Title, tg.Expr)
			}
		}
	}
	require.Regexp(t, jobLabel, `sum by (job) (up)`, "the check sees job")
}

func TestDashboardHasTheTriagePanels(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	titles := map[string]bool{}
	for _, p := range d.Panels {
		if p.Type != "row" {
			require.False(t, titles[p.Title], "two panels titled %q", p.Title)
			titles[p.Title] = true
		}
	}
	for _, want := range triagePanels {
		require.True(t, titles[want], "no panel %q", want)
	}
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
