package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified},
			}}, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }

	cases := []struct {
		name         string
		v, c         string
		read         func() (*debug.BuildInfo, bool)
		wantV, wantC string
	}{
		{"stamped by the linker", "v1.2.0", "abc123", vcs("zzz", "true"), "v1.2.0", "abc123"},
		{"go build in a clean checkout", "", "", vcs("def456", "false"), "dev", "def456"},
		{"go build with local edits", "", "", vcs("def456", "true"), "dev", "def456-dirty"},
		{"no VCS data", "", "", none, "dev", "unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.v, tc.c, tc.read)
			if got.Version != tc.wantV || got.Commit != tc.wantC || !strings.HasPrefix(got.Go, "go") {
				t.Fatalf("resolve = %+v, want version %q commit %q", got, tc.wantV, tc.wantC)
			}
		})
	}
}

func TestRegisterExportsTheBuild(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := Register(reg, Info{Version: "v1.2.0", Commit: "abc123", Go: "go1.26.0"}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP aegis_build_info Always 1; its labels say which build runs: release version, commit and Go toolchain.
# TYPE aegis_build_info gauge
aegis_build_info{commit="abc123",go="go1.26.0",version="v1.2.0"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "aegis_build_info"); err != nil {
		t.Fatal(err)
	}
	if got := (Info{Version: "v1.2.0", Commit: "abc123", Go: "go1.26.0"}).String("aegisctl"); got != "aegisctl v1.2.0 (commit abc123, go1.26.0)" {
		t.Fatalf("String = %q", got)
	}
}
