package main

import (
	"strings"
	"testing"
)

// A regenerated benchmarks.md keeps the findings below the marker and
// drops the old table above it.
func TestKeepFindingsKeepsTheProseBelowTheMarker(t *testing.T) {
	old := "# Benchmarks\n\n| old table |\n\n" + keepMarker + "\n\n## Findings\n\nprose\n"
	got := keepFindings("# Benchmarks\n\n| new table |\n", old)
	if strings.Contains(got, "old table") || !strings.Contains(got, "new table") || !strings.HasSuffix(got, keepMarker+"\n\n## Findings\n\nprose\n") {
		t.Fatalf("got:\n%s", got)
	}
	if got := keepFindings("doc\n", "no marker here"); got != "doc\n" {
		t.Fatalf("without a marker: %q", got)
	}
}
