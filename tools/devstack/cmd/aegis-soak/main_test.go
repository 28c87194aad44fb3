package main

import (
	"strings"
	"testing"
)

// A regenerated soak.md keeps the findings below the marker and drops the
// old report above it.
func TestKeepFindingsKeepsTheProseBelowTheMarker(t *testing.T) {
	old := "# Soak\n\n| old window |\n\n" + keepMarker + "\n\n## Findings\n\nprose\n"
	got := keepFindings("# Soak\n\n| new window |\n", old)
	if strings.Contains(got, "old window") || !strings.Contains(got, "new window") || !strings.HasSuffix(got, keepMarker+"\n\n## Findings\n\nprose\n") {
		t.Fatalf("got:\n%s", got)
	}
	if got := keepFindings("doc\n", "no marker here"); got != "doc\n" {
		t.Fatalf("without a marker: %q", got)
	}
}
