package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aegis-payments/aegis/pkg/proctest"
)

func root(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// secretVars are the variables docker-compose.yml must refuse to start
// without; dev.env sets them for local use.
var secretVars = []string{"POSTGRES_PASSWORD", "STRIPE_WEBHOOK_SECRET", "STRIPE_SECRET_KEY", "PAYSTACK_SECRET_KEY", "AEGIS_EVENT_SIGNING_KEY", "API_TOKENS", "DLQ_ADMIN_TOKENS"}

// compose runs docker-compose config on docker-compose.yml in an
// environment without any of secretVars, from a directory without a .env.
func compose(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Skip("docker-compose not installed (scripts/devdeps.sh compose installs it); not validating docker-compose.yml")
	}
	args = append([]string{"-f", filepath.Join(root(t), "docker-compose.yml"), "--project-directory", t.TempDir()}, args...)
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !slices.Contains(secretVars, strings.SplitN(kv, "=", 2)[0]) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "COMPOSE_PROJECT_NAME=aegis")
	return cmd.CombinedOutput()
}

// The file is valid with dev.env, with and without the dev profile (the
// PSP stand-in's, TestComposeStandInOnlyInTheDevProfile).
func TestComposeFileIsValidWithTheDevSecrets(t *testing.T) {
	t.Parallel()
	devEnv := filepath.Join(root(t), "dev.env")
	if out, err := compose(t, "--env-file", devEnv, "config", "-q"); err != nil {
		t.Fatalf("docker-compose --env-file dev.env config -q: %v\n%s", err, out)
	}
	if out, err := compose(t, "--env-file", devEnv, "--profile", "dev", "config", "-q"); err != nil {
		t.Fatalf("docker-compose --env-file dev.env --profile dev config -q: %v\n%s", err, out)
	}
}

// Without the secrets the stack refuses to start, naming what is missing:
// no well-known development secret can end up in a deployment by default.
func TestComposeRefusesToStartWithoutTheSecrets(t *testing.T) {
	t.Parallel()
	out, err := compose(t, "config", "-q")
	if err == nil {
		t.Fatal("docker-compose config succeeded without any secret")
	}
	if !strings.Contains(string(out), "(for local use, cp dev.env .env)") {
		t.Fatalf("the refusal must say how to run locally: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(root(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := os.ReadFile(filepath.Join(root(t), "dev.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range secretVars {
		if !strings.Contains(string(b), "${"+v+":?") {
			t.Errorf("docker-compose.yml must require %s with ${%s:?...}", v, v)
		}
		if !strings.Contains(string(dev), "\n"+v+"=") {
			t.Errorf("dev.env must set %s", v)
		}
	}
	for _, leaked := range []string{"whsec_aegis_local_dev", "dev-api-token", "dev-ops-token", "sk_test_", "POSTGRES_PASSWORD: aegis"} {
		if strings.Contains(string(b), leaked) {
			t.Errorf("docker-compose.yml holds a development secret (%s); it belongs in dev.env", leaked)
		}
	}
}

// Every published port is bound to the loopback interface.
func TestComposePublishesPortsOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	published := 0
	for i, line := range lines {
		if strings.TrimSpace(line) != "ports:" {
			continue
		}
		for _, entry := range lines[i+1:] {
			e := strings.TrimSpace(entry)
			if !strings.HasPrefix(e, "- ") {
				break
			}
			published++
			if !strings.HasPrefix(strings.Trim(strings.TrimPrefix(e, "- "), `"'`), "127.0.0.1:") {
				t.Errorf("port %s is not bound to 127.0.0.1", e)
			}
		}
	}
	if published < 5 {
		t.Fatalf("found %d published ports; the parser no longer reads the file", published)
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
	proctest.Heavy(t, "builds every image's binary outside the workspace")
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
