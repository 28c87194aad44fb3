package depth_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// rulesTestPath is promtool's unit tests of the rules (make rules-check).
const rulesTestPath = "../../../alerts/prometheus-rules.test.yml"

// runbooksDir holds one page per alert (docs/runbooks/<AlertName>.md).
const runbooksDir = "../../../../../docs/runbooks"

// The kinds of unit-test group every rule needs, by the prefix of the
// group's name (the convention prometheus-rules.test.yml's header states).
const (
	twoReplicas  = "two replicas:"
	exporterGone = "exporter gone:"
)

// serviceDown is the alert that pages when a rule's exporter is gone.
const serviceDown = "AegisServiceDown"

type unitTests struct {
	Tests []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

var (
	seriesName = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	podLabel   = regexp.MustCompile(`\bpod="([^"]+)"`)
)

func readRules(t *testing.T) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(rulesPath)
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	return f
}

// Every rule links its runbook through the runbook_base external label,
// and the page exists.
func TestEveryRuleHasARunbook(t *testing.T) {
	t.Parallel()
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			want := "{{ $externalLabels.runbook_base }}/" + r.Alert + ".md"
			require.Equal(t, want, r.Annotations["runbook_url"], "%s: runbook_url", r.Alert)
			_, err := os.Stat(filepath.Join(runbooksDir, r.Alert+".md"))
			require.NoError(t, err, "%s has no runbook docs/runbooks/%s.md", r.Alert, r.Alert)
		}
	}
}

// Every rule is unit-tested with two replicas exporting its inputs (in a
// "two replicas:" group, where it fires and a metric it reads comes from
// two pods) and with its exporter gone (in an "exporter gone:" group,
// where it fires itself or AegisServiceDown pages).
func TestEveryRuleIsTestedWithTwoReplicasAndWithItsExporterGone(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(rulesTestPath)
	require.NoError(t, err)
	var tests unitTests
	require.NoError(t, yaml.Unmarshal(raw, &tests))

	replicated := map[string]bool{} // alert -> tested firing with two replicas
	gone := map[string]bool{}       // alert -> tested with its exporter gone
	rules := readRules(t)
	metricsOf := map[string][]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names := metricName.FindAllString(r.Expr, -1)
			if len(names) == 0 && promUp.MatchString(r.Expr) {
				names = []string{"up"}
			}
			metricsOf[r.Alert] = names
		}
	}
	for _, g := range tests.Tests {
		fires := map[string]bool{}
		tested := map[string]bool{}
		for _, a := range g.AlertRuleTest {
			tested[a.Alertname] = true
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
		// pods per series name in the group's input
		pods := map[string]map[string]bool{}
		for _, s := range g.InputSeries {
			name := seriesName.FindString(s.Series)
			if pods[name] == nil {
				pods[name] = map[string]bool{}
			}
			if m := podLabel.FindStringSubmatch(s.Series); m != nil {
				pods[name][m[1]] = true
			}
		}
		switch {
		case strings.HasPrefix(g.Name, twoReplicas):
			for alert := range fires {
				for _, n := range metricsOf[alert] {
					if len(pods[n]) >= 2 {
						replicated[alert] = true
					}
				}
			}
		case strings.HasPrefix(g.Name, exporterGone):
			for alert := range tested {
				if fires[alert] || fires[serviceDown] {
					gone[alert] = true
				}
			}
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.True(t, replicated[r.Alert], "%s: no %q unit-test group where it fires on a metric that two pods export", r.Alert, twoReplicas)
			require.True(t, gone[r.Alert], "%s: no %q unit-test group that tests it and where it or %s fires", r.Alert, exporterGone, serviceDown)
		}
	}
}
