package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// runbookSections are the sections of every runbook, in this order
// (docs/runbooks/README.md, "How to read a page").
var runbookSections = []string{"## What it means", "## How to confirm", "## What to do", "## Related"}

// severityLine matches a runbook's one-line summary: its severity, bold,
// first.
var severityLine = regexp.MustCompile(`^\*\*(Critical|Warning|Info)\.\*\* `)

// ruleSeverities reads the alerting rules' names and severities.
func ruleSeverities(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "services", "dlq-admin", "alerts", "prometheus-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert  string            `yaml:"alert"`
				Labels map[string]string `yaml:"labels"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatalf("prometheus-rules.yml: %v", err)
	}
	out := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r.Labels["severity"]
			}
		}
	}
	return out
}

// TestRunbooksFollowTheTemplate fails for a runbook page that does not
// open with its alert's name and severity (the rule's), lacks a section of
// the template or has them out of order, is not about an alert of the
// rules, or is missing from the index.
func TestRunbooksFollowTheTemplate(t *testing.T) {
	t.Parallel()
	dir := root(t)
	rbDir := filepath.Join(dir, "docs", "runbooks")
	pages, err := filepath.Glob(filepath.Join(rbDir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(rbDir, "README.md"))
	if err != nil {
		t.Fatalf("the runbooks' index: %v", err)
	}
	rules := ruleSeverities(t, dir)
	n := 0
	for _, p := range pages {
		name := strings.TrimSuffix(filepath.Base(p), ".md")
		if name == "README" {
			continue
		}
		n++
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		if lines[0] != "# "+name {
			t.Errorf("%s.md: first line %q, want %q", name, lines[0], "# "+name)
		}
		summary := ""
		for _, l := range lines[1:] {
			if strings.TrimSpace(l) != "" {
				summary = l
				break
			}
		}
		m := severityLine.FindStringSubmatch(summary)
		if m == nil {
			t.Errorf("%s.md: the line under the title must start with the severity (**Critical.**, **Warning.**), got %q", name, summary)
		}
		severity, ok := rules[name]
		switch {
		case !ok:
			t.Errorf("%s.md: no rule of prometheus-rules.yml has alert %s", name, name)
		case m != nil && !strings.EqualFold(m[1], severity):
			t.Errorf("%s.md: says %s, the rule's severity is %s", name, m[1], severity)
		}
		text := strings.Join(prose(string(b)), "\n")
		at := 0
		for _, s := range runbookSections {
			i := strings.Index(text[at:], "\n"+s+"\n")
			if i < 0 {
				t.Errorf("%s.md: section %q missing, or not after %q", name, s, runbookSections[max(0, indexOf(runbookSections, s)-1)])
				continue
			}
			at += i + 1
		}
		if !strings.Contains(string(index), "]("+name+".md)") {
			t.Errorf("docs/runbooks/README.md does not list %s", name)
		}
	}
	if n == 0 {
		t.Fatal("docs/runbooks has no runbook")
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
