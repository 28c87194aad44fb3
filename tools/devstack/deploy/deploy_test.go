package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"testing"
)

func root(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

func TestComposeFileIsValid(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Skip("docker-compose not installed (scripts/devdeps.sh compose installs it); not validating docker-compose.yml")
	}
	cmd := exec.Command(bin, "-f", filepath.Join(root(t), "docker-compose.yml"), "config", "-q")
	cmd.Env = append(os.Environ(), "COMPOSE_PROJECT_NAME=aegis")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker-compose config -q: %v\n%s", err, out)
	}
}

// images lists what docker-compose.yml builds: (MODULE, PACKAGE) pairs read
// from the file itself, so a new service there is covered here.
func images(t *testing.T) [][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)MODULE: (\S+)(?:\n\s+PACKAGE: (\S+))?`)
	seen := map[[2]string]bool{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		pkg := m[2]
		if pkg == "" {
			pkg = "."
		}
		seen[[2]string{m[1], pkg}] = true
	}
	var out [][2]string
	for k := range seen {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+out[i][1] < out[j][0]+out[j][1] })
	if len(out) < 5 {
		t.Fatalf("expected the four services and the PSP stand-in in docker-compose.yml, found %v", out)
	}
	return out
}

func TestEveryImageBuildsWithoutTheWorkspace(t *testing.T) {
	t.Parallel()
	src := root(t)
	for _, img := range images(t) {
		module, pkg := img[0], img[1]
		t.Run(module+"/"+pkg, func(t *testing.T) {
			t.Parallel()
			ctx := t.TempDir()
			for _, dir := range []string{"pkg", "migrations", module} {
				dst := filepath.Join(ctx, dir)
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command("cp", "-r", filepath.Join(src, dir), dst).CombinedOutput(); err != nil {
					t.Fatalf("copy %s: %v\n%s", dir, err, out)
				}
			}
			cmd := exec.Command("go", "build", "-o", os.DevNull, pkg)
			cmd.Dir = filepath.Join(ctx, module)
			cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("GOWORK=off go build %s in %s: %v\n%s", pkg, module, err, out)
			}
		})
	}
}
