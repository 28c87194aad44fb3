package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-payments/aegis/pkg/proctest"
)

// releaseVersion is what make release accepts: vMAJOR.MINOR.PATCH with an
// optional pre-release (scripts/release.sh).
var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)

// makeCmd runs make in the repository root, or skips without make.
func makeCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make not installed")
	}
	cmd := exec.Command(bin, append([]string{"-s", "--no-print-directory", "-C", root(t)}, args...)...)
	cmd.Env = os.Environ()
	return cmd
}

// A binary built with the Makefile's -ldflags (make build, make release)
// says the version and commit it was stamped with: a service (service.Main)
// and a dev tool (the PSP stand-in's image).
func TestBuildStampsTheVersion(t *testing.T) {
	proctest.Heavy(t, "builds webhook-api and aegis-psp")
	t.Parallel()
	out, err := makeCmd(t, "ldflags", "VERSION=v0.0.0-stamp.test", "COMMIT=0123456789abcdef").Output()
	if err != nil {
		t.Fatalf("make ldflags: %v", err)
	}
	ldflags := strings.TrimSpace(string(out))
	dir := t.TempDir()
	build := exec.Command("go", "build", "-ldflags", ldflags, "-o", dir+string(filepath.Separator),
		"./services/webhook-api", "./tools/devstack/cmd/aegis-psp")
	build.Dir = root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags %q: %v\n%s", ldflags, err, out)
	}
	for _, name := range []string{"webhook-api", "aegis-psp"} {
		for _, arg := range []string{"--version", "version"} {
			got, err := exec.Command(filepath.Join(dir, name), arg).Output()
			if err != nil {
				t.Fatalf("%s %s: %v", name, arg, err)
			}
			want := name + " v0.0.0-stamp.test (commit 0123456789abcdef, " + runtime.Version() + ")\n"
			if string(got) != want {
				t.Fatalf("%s %s printed %q, want %q", name, arg, got, want)
			}
		}
	}
}

// The production overlay runs one release everywhere: every image's newTag
// is the same version, a version make release would cut, with its section in
// CHANGELOG.md (a production overlay never pins a build nobody released).
func TestProductionOverlayRunsOneReleasedVersion(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "k8s", "overlays", "production", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct {
			Name   string `yaml:"name"`
			NewTag string `yaml:"newTag"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	version := ""
	for _, img := range k.Images {
		seen[img.Name] = true
		if version == "" {
			version = img.NewTag
		}
		if img.NewTag != version {
			t.Errorf("%s runs %q, the others %q: the overlay must run one release", img.Name, img.NewTag, version)
		}
	}
	for _, svc := range []string{"webhook-api", "outbox-relay", "payout-worker", "dlq-admin"} {
		if !seen["aegis/"+svc] {
			t.Errorf("the overlay does not pin aegis/%s", svc)
		}
	}
	if !releaseVersion.MatchString(version) {
		t.Fatalf("the overlay's tag %q is not a release version (vMAJOR.MINOR.PATCH)", version)
	}
	changelog, err := os.ReadFile(filepath.Join(root(t), "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`(?m)^## \[v?` + regexp.QuoteMeta(strings.TrimPrefix(version, "v")) + `\]`)
	if !section.Match(changelog) {
		t.Fatalf("the overlay runs %s, which has no section in CHANGELOG.md", version)
	}
}

// make release refuses, before it builds or changes anything, without a
// VERSION (the Makefile's git-describe default does not count), with one
// that is not vX.Y.Z, and with one CHANGELOG.md does not describe.
func TestReleaseRefusesWithoutAVersionOrItsChangelog(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{nil, "VERSION is required"},
		{[]string{"VERSION=1.2.3"}, "VERSION must be vMAJOR.MINOR.PATCH"},
		{[]string{"VERSION=v99.98.97"}, "CHANGELOG.md has no section for v99.98.97"},
	}
	for _, tc := range cases {
		cmd := makeCmd(t, append([]string{"release"}, tc.args...)...)
		var env []string
		for _, kv := range cmd.Env {
			if !strings.HasPrefix(kv, "VERSION=") {
				env = append(env, kv)
			}
		}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("make release %v succeeded", tc.args)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("make release %v: want %q in\n%s", tc.args, tc.want, out)
		}
	}
}

// scripts/release.sh refuses a working tree with changes: a release is
// built from a commit alone. Checked in a scratch repository holding the
// script and a changelog, so this repository's own state does not matter.
func TestReleaseRefusesADirtyTree(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join(root(t), "scripts", "release.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "release.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte("# Changelog\n\n## [1.2.3] - 2026-01-01\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "scratch")
	if err := os.WriteFile(filepath.Join(dir, "stray.go"), []byte("package stray\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "scripts", "release.sh"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RELEASE_VERSION=v1.2.3", "LDFLAGS=unused")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("release.sh succeeded with an untracked file:\n%s", out)
	}
	if !strings.Contains(string(out), "uncommitted or untracked changes") {
		t.Fatalf("the refusal must say why:\n%s", out)
	}
}
