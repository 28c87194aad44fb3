package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeService is what these tests read of a docker-compose.yml service
// (YAML anchors and merge keys resolved by the decoder).
type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	PullPolicy  string            `yaml:"pull_policy"`
	Profiles    []string          `yaml:"profiles"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   any               `yaml:"depends_on"` // a list or a map

}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if len(f.Services) < 5 {
		t.Fatalf("read %d services from docker-compose.yml; the parser no longer reads it", len(f.Services))
	}
	return f
}

// interpolation is one ${NAME...} of a compose value.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// defaultValue is value as compose resolves it when none of the variables
// it names is set: ${X:-d} is d, ${X} is empty, ${X:?…} refuses to start
// (ok false: there is no default to judge).
func defaultValue(value string) (string, bool) {
	ok := true
	out := interpolation.ReplaceAllStringFunc(value, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		switch {
		case strings.HasSuffix(sub[2], "?"):
			ok = false
			return ""
		case strings.HasSuffix(sub[2], "-"):
			return sub[3]
		default:
			return ""
		}
	})
	return out, ok
}

func isStandIn(name string, s composeService) bool {
	return name == "psp" || strings.Contains(s.Image, "psp") || strings.Contains(yamlString(s.Build), "aegis-psp")
}

// dependsOn says whether s depends on the service name (depends_on is a
// list of names or a map by name).
func dependsOn(s composeService, name string) bool {
	switch d := s.DependsOn.(type) {
	case []any:
		return slices.Contains(d, any(name))
	case map[string]any:
		_, ok := d[name]
		return ok
	}
	return false
}

func yamlString(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// The apache/kafka image writes its log to /tmp/kraft-combined-logs unless
// KAFKA_LOG_DIRS says otherwise: inside the container, lost with it. It
// must be the path a named volume is mounted on.
func TestComposeKafkaKeepsItsLogOnItsVolume(t *testing.T) {
	t.Parallel()
	f := readCompose(t)
	kafka, ok := f.Services["kafka"]
	if !ok {
		t.Fatal("docker-compose.yml has no kafka service")
	}
	dir := kafka.Environment["KAFKA_LOG_DIRS"]
	if dir == "" {
		t.Fatal("kafka: KAFKA_LOG_DIRS is not set; the image then writes to /tmp/kraft-combined-logs, off the volume")
	}
	for _, v := range kafka.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			continue
		}
		if _, named := f.Volumes[parts[0]]; named && parts[1] == dir {
			return
		}
	}
	t.Fatalf("kafka: KAFKA_LOG_DIRS %q is not the mount path of a named volume (%v)", dir, kafka.Volumes)
}

// exactTag is a pinned release: MAJOR.MINOR.PATCH (with an optional v and
// variant, 7.4.11-alpine), or MAJOR.MINOR for PostgreSQL, whose minor
// releases are its patch releases (15.18).
var (
	exactTag    = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(-[A-Za-z0-9.]+)?$`)
	postgresTag = regexp.MustCompile(`^[0-9]+\.[0-9]+(-[A-Za-z0-9.]+)?$`)
)

// Every image compose pulls is pinned to an exact version: never a
// floating `15`, `7-alpine` or `latest` that changes under a running setup.
// Images compose builds from this checkout (a build section) are exempt.
func TestComposeImagesArePinned(t *testing.T) {
	t.Parallel()
	pulled := 0
	for name, s := range readCompose(t).Services {
		if s.Build != nil {
			continue
		}
		pulled++
		repo, tag, ok := strings.Cut(s.Image, ":")
		if strings.Contains(tag, "/") || strings.Contains(tag, "@") {
			t.Errorf("%s: cannot read the tag of %q", name, s.Image)
			continue
		}
		if repo == "jaegertracing/all-in-one" {
			t.Errorf("%s: %q is end-of-life Jaeger v1; use jaegertracing/jaeger (v2)", name, s.Image)
		}
		pinned := exactTag.MatchString(tag) || strings.HasSuffix(repo, "postgres") && postgresTag.MatchString(tag)
		if !ok || !pinned {
			t.Errorf("%s: image %q is not pinned to an exact version (want e.g. redis:7.4.11-alpine, postgres:15.18)", name, s.Image)
		}
	}
	if pulled < 5 {
		t.Fatalf("found %d pulled images; the parser no longer reads the file", pulled)
	}
	for _, bad := range []string{"postgres:15", "redis:7-alpine", "grafana/grafana:latest", "prom/prometheus", "redis:7.4"} {
		repo, tag, _ := strings.Cut(bad, ":")
		if exactTag.MatchString(tag) || strings.HasSuffix(repo, "postgres") && postgresTag.MatchString(tag) {
			t.Errorf("the check accepts the floating %q", bad)
		}
	}
}

// The PSP stand-in runs only under the dev profile, and nothing outside
// that profile depends on it.
func TestComposeStandInOnlyInTheDevProfile(t *testing.T) {
	t.Parallel()
	found := false
	services := readCompose(t).Services
	for name, s := range services {
		if !isStandIn(name, s) {
			continue
		}
		found = true
		if !slices.Equal(s.Profiles, []string{"dev"}) {
			t.Errorf("%s (the PSP stand-in) has profiles %v; want only [dev]", name, s.Profiles)
		}
		for k, v := range s.Environment {
			for _, service := range []string{"STRIPE_WEBHOOK_SECRET", "STRIPE_SECRET_KEY", "PAYSTACK_SECRET_KEY"} {
				if k == service || strings.Contains(v, "${"+service) {
					t.Errorf("%s: %s=%s hands the stand-in the services' %s; it has its own PSP_* variables", name, k, v, service)
				}
			}
		}
		for other, o := range services {
			if dependsOn(o, name) && !slices.Contains(o.Profiles, "dev") {
				t.Errorf("%s depends on the stand-in %s outside the dev profile", other, name)
			}
		}
	}
	if !found {
		t.Fatal("no PSP stand-in service in docker-compose.yml")
	}
}

// Outside the dev profile no service's default points at the stand-in:
// without dev.env the services call the real PSP APIs. dev.env (the
// documented dev path) points them at it.
func TestComposeDefaultsToTheRealPSPs(t *testing.T) {
	t.Parallel()
	standIn := regexp.MustCompile(`//psp[:/]|:12111`)
	checked := 0
	for name, s := range readCompose(t).Services {
		if slices.Contains(s.Profiles, "dev") || isStandIn(name, s) {
			continue
		}
		for k, v := range s.Environment {
			def, ok := defaultValue(v)
			if !ok {
				continue
			}
			if standIn.MatchString(def) {
				t.Errorf("%s: %s defaults to the stand-in (%q) outside the dev profile", name, k, def)
			}
			if strings.HasSuffix(k, "_API_BASE") {
				checked++
				if want := map[string]string{"STRIPE_API_BASE": "https://api.stripe.com", "PAYSTACK_API_BASE": "https://api.paystack.co"}[k]; def != want {
					t.Errorf("%s: %s defaults to %q, want %q", name, k, def, want)
				}
			}
		}
	}
	if checked < 4 {
		t.Fatalf("checked %d *_API_BASE defaults; expected those of webhook-api, payout-worker and dlq-admin", checked)
	}
	dev, err := os.ReadFile(filepath.Join(root(t), "dev.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"STRIPE_API_BASE=http://psp:12111", "PAYSTACK_API_BASE=http://psp:12111"} {
		if !strings.Contains(string(dev), "\n"+line+"\n") {
			t.Errorf("dev.env must point the services at the stand-in: %s", line)
		}
	}
	for _, v := range []string{"PSP_STRIPE_WEBHOOK_SECRET", "PSP_PAYSTACK_SECRET_KEY"} {
		if !strings.Contains(string(dev), "\n"+v+"=") {
			t.Errorf("dev.env must give the stand-in its own %s", v)
		}
	}
}

func TestDefaultValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"${STRIPE_API_BASE:-https://api.stripe.com}": "https://api.stripe.com",
		"x${A}y${B-z}": "xyz",
		"plain":        "plain",
	} {
		got, ok := defaultValue(in)
		if got != want || !ok {
			t.Errorf("defaultValue(%q) = %q, %v", in, got, ok)
		}
	}
	if _, ok := defaultValue("${A:?set A}"); ok {
		t.Error("a required variable has no default")
	}
}

// Every image compose builds is stamped with the version and commit it is
// given (AEGIS_VERSION, AEGIS_COMMIT), as make release stamps its own: an
// image that cannot say which build it is cannot be followed in a rollout.
func TestComposeBuildsStampTheVersion(t *testing.T) {
	built := 0
	for name, s := range readCompose(t).Services {
		if s.Build == nil {
			continue
		}
		built++
		if s.PullPolicy != "build" {
			t.Errorf("service %s: builds %s without pull_policy: build, so compose would first pull an image of that name from a registry", name, s.Image)
		}
		b, ok := s.Build.(map[string]any)
		if !ok {
			t.Fatalf("service %s: build is %T, want a map with args", name, s.Build)
		}
		args, _ := b["args"].(map[string]any)
		for arg, env := range map[string]string{"VERSION": "AEGIS_VERSION", "COMMIT": "AEGIS_COMMIT"} {
			v, _ := args[arg].(string)
			if !strings.Contains(v, "${"+env) {
				t.Errorf("service %s: build arg %s = %q, want it from ${%s}", name, arg, v, env)
			}
		}
	}
	if built == 0 {
		t.Fatal("no service builds an image: the test reads the wrong file")
	}
}
