package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The margin each Deployment's terminationGracePeriodSeconds keeps beyond
// its preStop sleep and SHUTDOWN_GRACE: closing the pools and flushing the
// last spans (up to 5s) after the stages have stopped.
const stopMargin = 10 * time.Second

// overlays are the kustomizations under deploy/k8s that are rendered and
// checked.
var overlays = []string{"base", "overlays/production"}

// render builds deploy/k8s/<dir> under k8sRoot with the kustomize pinned in
// deploy/go.mod.
func render(t *testing.T, k8sRoot, dir string) []obj {
	t.Helper()
	out := kustomize(t, filepath.Join(k8sRoot, dir), "build", ".")
	var docs []obj
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		if d != nil {
			docs = append(docs, obj(d))
		}
	}
	if len(docs) < 10 {
		t.Fatalf("kustomize build %s rendered %d objects", dir, len(docs))
	}
	return docs
}

// kustomize runs the pinned kustomize (deploy/go.mod's tool) in dir.
func kustomize(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the pinned kustomize")
	}
	// go tool -n builds the tool (cached) and prints its path: it then runs
	// in any directory, as `kustomize edit` needs.
	locate := exec.Command("go", "tool", "-n", "kustomize")
	locate.Dir = filepath.Join(root(t), "deploy")
	locate.Env = append(os.Environ(), "GOWORK=off")
	bin, err := locate.Output()
	if err != nil {
		t.Fatalf("go tool -n kustomize in deploy/: %v", err)
	}
	cmd := exec.Command(strings.TrimSpace(string(bin)), args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return out
}

// obj is one rendered object.
type obj map[string]any

// at walks keys (string for maps, int for lists) and returns nil when a
// step is missing.
func (o obj) at(path ...any) any {
	var cur any = map[string]any(o)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			cur = l[k]
		}
	}
	return cur
}

func (o obj) str(path ...any) string {
	s, _ := o.at(path...).(string)
	return s
}

func (o obj) list(path ...any) []any {
	l, _ := o.at(path...).([]any)
	return l
}

func (o obj) kind() string { return o.str("kind") }
func (o obj) name() string { return o.str("metadata", "name") }
func (o obj) id() string   { return o.kind() + "/" + o.name() }

// workloads are the Deployments and Jobs: what runs pods.
func workloads(docs []obj) []obj {
	var out []obj
	for _, d := range docs {
		if d.kind() == "Deployment" || d.kind() == "Job" {
			out = append(out, d)
		}
	}
	return out
}

func ofKind(docs []obj, kind string) []obj {
	var out []obj
	for _, d := range docs {
		if d.kind() == kind {
			out = append(out, d)
		}
	}
	return out
}

func podLabels(w obj) map[string]string {
	out := map[string]string{}
	m, _ := w.at("spec", "template", "metadata", "labels").(map[string]any)
	for k, v := range m {
		out[k], _ = v.(string)
	}
	return out
}

// selects reports whether a NetworkPolicy's podSelector matches labels
// (matchLabels and matchExpressions, as the API server evaluates them).
func selects(t *testing.T, np obj, labels map[string]string) bool {
	t.Helper()
	sel, _ := np.at("spec", "podSelector").(map[string]any)
	ml, _ := sel["matchLabels"].(map[string]any)
	for k, v := range ml {
		if labels[k] != v {
			return false
		}
	}
	exprs, _ := sel["matchExpressions"].([]any)
	for _, e := range exprs {
		ex := obj(e.(map[string]any))
		val, has := labels[ex.str("key")]
		var values []string
		for _, v := range ex.list("values") {
			values = append(values, v.(string))
		}
		switch ex.str("operator") {
		case "In":
			if !has || !slices.Contains(values, val) {
				return false
			}
		case "NotIn":
			if has && slices.Contains(values, val) {
				return false
			}
		case "Exists":
			if !has {
				return false
			}
		case "DoesNotExist":
			if has {
				return false
			}
		default:
			t.Fatalf("%s: unknown selector operator %q", np.id(), ex.str("operator"))
		}
	}
	return true
}

func policyTypes(np obj) []string {
	var out []string
	for _, p := range np.list("spec", "policyTypes") {
		out = append(out, p.(string))
	}
	return out
}

// TestManifests renders base and production and checks what the manifests
// promise: network policies that select the pods, deny by default both ways,
// let DNS out, let each workload reach what it uses on its configured ports
// (and no more), let Prometheus scrape and let in only the APIs; scale left
// to the autoscalers; requests and limits; a graceful stop; a migrate Job
// per release.
func TestManifests(t *testing.T) {
	t.Parallel()
	k8s := filepath.Join(root(t), "deploy", "k8s")
	for _, dir := range overlays {
		t.Run(strings.ReplaceAll(dir, "/", "_"), func(t *testing.T) {
			docs := render(t, k8s, dir)
			checkNetworkPolicies(t, docs)
			checkScrapesAllowed(t, docs)
			checkDependencies(t, docs)
			checkIngress(t, docs)
			checkScaleOwners(t, docs)
			checkSelectors(t, docs)
			checkResources(t, docs)
			checkGracefulStop(t, docs)
			checkMigrateJobName(t, docs)
		})
	}
}

func checkNetworkPolicies(t *testing.T, docs []obj) {
	t.Helper()
	ws := workloads(docs)
	nps := ofKind(docs, "NetworkPolicy")
	if len(ws) < 5 || len(nps) == 0 {
		t.Fatalf("found %d workloads and %d network policies", len(ws), len(nps))
	}
	for _, np := range nps {
		n := 0
		for _, w := range ws {
			if selects(t, np, podLabels(w)) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s selects no workload's pods", np.id())
		}
	}
	for _, w := range ws {
		labels := podLabels(w)
		var denied, dns bool
		for _, np := range nps {
			if !selects(t, np, labels) {
				continue
			}
			types := policyTypes(np)
			if slices.Contains(types, "Ingress") && slices.Contains(types, "Egress") &&
				np.at("spec", "ingress") == nil && np.at("spec", "egress") == nil {
				denied = true
			}
			if slices.Contains(types, "Egress") && allowsDNS(np) {
				dns = true
			}
		}
		if !denied {
			t.Errorf("%s: no default-deny policy (Ingress and Egress, no rules) selects its pods %v", w.id(), labels)
		}
		if !dns {
			t.Errorf("%s: no policy lets its pods reach DNS (UDP and TCP 53)", w.id())
		}
	}
}

// Prometheus scrapes the port in each pod's prometheus.io/port annotation:
// some policy selecting the pods must let it in.
func checkScrapesAllowed(t *testing.T, docs []obj) {
	t.Helper()
	for _, d := range ofKind(docs, "Deployment") {
		port := d.str("spec", "template", "metadata", "annotations", "prometheus.io/port")
		if port == "" {
			t.Errorf("%s: no prometheus.io/port annotation", d.id())
			continue
		}
		var allowed bool
		for _, np := range ofKind(docs, "NetworkPolicy") {
			if !selects(t, np, podLabels(d)) {
				continue
			}
			for _, r := range np.list("spec", "ingress") {
				for _, p := range obj(r.(map[string]any)).list("ports") {
					if fmt.Sprint(obj(p.(map[string]any)).at("port")) == port {
						allowed = true
					}
				}
			}
		}
		if !allowed {
			t.Errorf("%s: no policy lets Prometheus in on its metrics port %s", d.id(), port)
		}
	}
}

// uses is what each workload talks to, from the services' config readers:
// Postgres for all, Kafka (KAFKA_BROKERS) for the relay, the worker and
// dlq-admin, Redis (REDIS_URLS) for the worker alone; 443 for the PSPs
// (webhook-api's reconciliation, the worker, dlq-admin's Paystack OTP) and
// the relay's outbound endpoints.
var uses = map[string][]string{
	"webhook-api":   {"postgres", "https"},
	"outbox-relay":  {"postgres", "kafka", "https"},
	"payout-worker": {"postgres", "kafka", "redis", "https"},
	"dlq-admin":     {"postgres", "kafka", "https"},
	"aegis-migrate": {"postgres"},
}

// depPorts are the ports a workload's container is configured to reach
// each dependency on.
func depPorts(t *testing.T, docs []obj, c obj) map[string][]string {
	t.Helper()
	out := map[string][]string{"postgres": {"5432"}, "https": {"443"}}
	if v, ok := env(docs, c, "KAFKA_BROKERS"); ok {
		for _, b := range strings.Split(v, ",") {
			out["kafka"] = append(out["kafka"], b[strings.LastIndex(b, ":")+1:])
		}
	}
	redis, ok := env(docs, c, "REDIS_URLS")
	if !ok {
		redis, _ = env(docs, c, "REDIS_URL")
	}
	for _, u := range strings.Split(redis, ",") {
		if u == "" {
			continue
		}
		hostPort := strings.SplitN(strings.SplitN(u, "://", 2)[1], "/", 2)[0]
		out["redis"] = append(out["redis"], hostPort[strings.LastIndex(hostPort, ":")+1:])
	}
	return out
}

// egressPorts are the ports the policies selecting labels let out ("*":
// a rule without ports).
func egressPorts(t *testing.T, docs []obj, labels map[string]string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, np := range ofKind(docs, "NetworkPolicy") {
		if !selects(t, np, labels) {
			continue
		}
		for _, r := range np.list("spec", "egress") {
			ports := obj(r.(map[string]any)).list("ports")
			if len(ports) == 0 {
				out["*"] = true
			}
			for _, p := range ports {
				out[fmt.Sprint(obj(p.(map[string]any)).at("port"))] = true
			}
		}
	}
	return out
}

// Each workload may reach, on the configured ports, what it uses and no
// more: Kafka and Redis only from their users, no rule open to every port.
func checkDependencies(t *testing.T, docs []obj) {
	t.Helper()
	for _, w := range workloads(docs) {
		labels := podLabels(w)
		name := labels["app.kubernetes.io/name"]
		deps, known := uses[name]
		if !known {
			t.Errorf("%s: pods named %q: add what it talks to to the test's uses", w.id(), name)
			continue
		}
		allowed := egressPorts(t, docs, labels)
		if allowed["*"] {
			t.Errorf("%s: an egress rule without ports lets it reach anything", w.id())
		}
		for _, c := range containers(w) {
			for dep, ports := range depPorts(t, docs, c) {
				slices.Sort(ports)
				for _, port := range slices.Compact(ports) {
					if slices.Contains(deps, dep) && !allowed[port] {
						t.Errorf("%s: uses %s on port %s, which no network policy lets out", w.id(), dep, port)
					}
					if !slices.Contains(deps, dep) && allowed[port] {
						t.Errorf("%s: does not use %s, yet a network policy lets it out on %s", w.id(), dep, port)
					}
				}
			}
		}
	}
}

// ingressPorts are the ports let in to each workload's pods: the public API
// of webhook-api, dlq-admin's operator API, the metrics port of each
// service; nothing to the migrate Job.
var ingressPorts = map[string][]string{
	"webhook-api":   {"8080", "9090"},
	"outbox-relay":  {"9090"},
	"payout-worker": {"9090"},
	"dlq-admin":     {"8083", "9090"},
	"aegis-migrate": nil,
}

func checkIngress(t *testing.T, docs []obj) {
	t.Helper()
	for _, w := range workloads(docs) {
		labels := podLabels(w)
		var got []string
		for _, np := range ofKind(docs, "NetworkPolicy") {
			if !selects(t, np, labels) {
				continue
			}
			for _, r := range np.list("spec", "ingress") {
				ro := obj(r.(map[string]any))
				if len(ro.list("from")) == 0 {
					t.Errorf("%s: %s lets in every source", w.id(), np.id())
				}
				ports := ro.list("ports")
				if len(ports) == 0 {
					got = append(got, "*")
				}
				for _, p := range ports {
					got = append(got, fmt.Sprint(obj(p.(map[string]any)).at("port")))
				}
			}
		}
		slices.Sort(got)
		got = slices.Compact(got)
		if want := ingressPorts[labels["app.kubernetes.io/name"]]; !slices.Equal(got, want) {
			t.Errorf("%s: network policies let in ports %v, want %v", w.id(), got, want)
		}
	}
}

// allowsDNS: an egress rule with UDP 53 and TCP 53.
func allowsDNS(np obj) bool {
	for _, r := range np.list("spec", "egress") {
		var udp, tcp bool
		for _, p := range obj(r.(map[string]any)).list("ports") {
			po := obj(p.(map[string]any))
			if fmt.Sprint(po.at("port")) != "53" {
				continue
			}
			switch po.str("protocol") {
			case "UDP":
				udp = true
			case "TCP", "":
				tcp = true
			}
		}
		if udp && tcp {
			return true
		}
	}
	return false
}

func checkScaleOwners(t *testing.T, docs []obj) {
	t.Helper()
	targets := map[string]string{}
	for _, d := range ofKind(docs, "HorizontalPodAutoscaler") {
		targets[d.str("spec", "scaleTargetRef", "name")] = d.id()
	}
	for _, d := range ofKind(docs, "ScaledObject") {
		targets[d.str("spec", "scaleTargetRef", "name")] = d.id()
	}
	if len(targets) < 2 {
		t.Fatalf("expected webhook-api's HPA and payout-worker's ScaledObject, found %v", targets)
	}
	for name, owner := range targets {
		var found bool
		for _, d := range ofKind(docs, "Deployment") {
			if d.name() != name {
				continue
			}
			found = true
			if d.at("spec", "replicas") != nil {
				t.Errorf("%s sets replicas, but %s owns its scale: each apply would reset it", d.id(), owner)
			}
		}
		if !found {
			t.Errorf("%s targets Deployment %s, which is not rendered", owner, name)
		}
	}
}

// A Deployment's selector is immutable: a label added to it (kustomize's
// includeSelectors) would make every apply to a running cluster fail. They
// stay app.kubernetes.io/name alone.
func checkSelectors(t *testing.T, docs []obj) {
	t.Helper()
	for _, d := range ofKind(docs, "Deployment") {
		sel, _ := d.at("spec", "selector", "matchLabels").(map[string]any)
		if len(sel) != 1 || sel["app.kubernetes.io/name"] != d.name() {
			t.Errorf("%s: selector %v, want app.kubernetes.io/name=%s alone (selectors are immutable)", d.id(), sel, d.name())
		}
	}
}

func containers(w obj) []obj {
	var out []obj
	for _, key := range []string{"initContainers", "containers"} {
		for _, c := range w.list("spec", "template", "spec", key) {
			out = append(out, obj(c.(map[string]any)))
		}
	}
	return out
}

func checkResources(t *testing.T, docs []obj) {
	t.Helper()
	for _, w := range workloads(docs) {
		for _, c := range containers(w) {
			for _, kind := range []string{"requests", "limits"} {
				for _, res := range []string{"cpu", "memory"} {
					if c.at("resources", kind, res) == nil {
						t.Errorf("%s container %s: no %s.%s", w.id(), c.str("name"), kind, res)
					}
				}
			}
		}
	}
}

// env returns a container's variable: its own value, else the first
// ConfigMap of its envFrom that has it.
func env(docs []obj, c obj, name string) (string, bool) {
	for _, e := range c.list("env") {
		eo := obj(e.(map[string]any))
		if eo.str("name") == name {
			v, ok := eo.at("value").(string)
			return v, ok
		}
	}
	for _, ef := range c.list("envFrom") {
		cm := obj(ef.(map[string]any)).str("configMapRef", "name")
		for _, d := range ofKind(docs, "ConfigMap") {
			if d.name() == cm {
				if v, ok := d.at("data", name).(string); ok {
					return v, true
				}
			}
		}
	}
	return "", false
}

func checkGracefulStop(t *testing.T, docs []obj) {
	t.Helper()
	for _, d := range ofKind(docs, "Deployment") {
		tgps, ok := d.at("spec", "template", "spec", "terminationGracePeriodSeconds").(int)
		if !ok {
			t.Errorf("%s: no terminationGracePeriodSeconds (the default 30s is not derived from SHUTDOWN_GRACE)", d.id())
			continue
		}
		for _, c := range containers(d) {
			sleep, ok := c.at("lifecycle", "preStop", "sleep", "seconds").(int)
			if !ok || sleep <= 0 {
				t.Errorf("%s container %s: no preStop sleep: the listener would close before the endpoints drop the pod", d.id(), c.str("name"))
				continue
			}
			v, ok := env(docs, c, "SHUTDOWN_GRACE")
			if !ok {
				t.Errorf("%s container %s: SHUTDOWN_GRACE is not set, so its stop time cannot be checked", d.id(), c.str("name"))
				continue
			}
			grace, err := time.ParseDuration(v)
			if err != nil {
				t.Errorf("%s container %s: SHUTDOWN_GRACE %q: %v", d.id(), c.str("name"), v, err)
				continue
			}
			need := time.Duration(sleep)*time.Second + grace + stopMargin
			if got := time.Duration(tgps) * time.Second; got < need {
				t.Errorf("%s: terminationGracePeriodSeconds %s < preStop %ds + SHUTDOWN_GRACE %s + %s", d.id(), got, sleep, grace, stopMargin)
			}
		}
	}
}

// imageTag is the tag of image (registry/name:tag).
func imageTag(image string) string {
	name := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(name, ":"); i >= 0 {
		return name[i+1:]
	}
	return ""
}

func migrateJob(t *testing.T, docs []obj) (job obj, webhookAPITag string) {
	t.Helper()
	var jobs []obj
	for _, d := range ofKind(docs, "Job") {
		if d.str("metadata", "labels", "app.kubernetes.io/component") == "migrate" {
			jobs = append(jobs, d)
		}
	}
	if len(jobs) != 1 {
		t.Fatalf("want one migrate Job, found %d", len(jobs))
	}
	for _, d := range ofKind(docs, "Deployment") {
		if d.name() == "webhook-api" {
			webhookAPITag = imageTag(containers(d)[0].str("image"))
		}
	}
	if webhookAPITag == "" {
		t.Fatal("no webhook-api image tag")
	}
	return jobs[0], webhookAPITag
}

// A Job's spec is immutable: the next release's apply must create a new
// Job, named after the release, not update the previous one.
func checkMigrateJobName(t *testing.T, docs []obj) {
	t.Helper()
	job, tag := migrateJob(t, docs)
	if want := "aegis-migrate-" + tag; job.name() != want {
		t.Errorf("migrate Job is %s, want %s (webhook-api's tag): a release must make a new Job", job.name(), want)
	}
	if job.at("spec", "ttlSecondsAfterFinished") == nil {
		t.Errorf("%s: no ttlSecondsAfterFinished: every release's Job would stay", job.id())
	}
}

// A release bumps the production overlay's images with `kustomize edit set
// image` and nothing else: the migrate Job is then a new one.
func TestMigrateJobFollowsTheRelease(t *testing.T) {
	t.Parallel()
	src := filepath.Join(root(t), "deploy", "k8s")
	k8s := filepath.Join(t.TempDir(), "k8s")
	for _, dir := range []string{"base", "overlays/production"} {
		copyDir(t, filepath.Join(src, dir), filepath.Join(k8s, dir))
	}
	before, oldTag := migrateJob(t, render(t, k8s, "overlays/production"))
	newTag := "9.8.7"
	if oldTag == newTag {
		newTag = "9.8.8"
	}
	kustomize(t, filepath.Join(k8s, "overlays/production"), "edit", "set", "image",
		"aegis/webhook-api=registry.example.com/aegis/webhook-api:"+newTag)
	after, tag := migrateJob(t, render(t, k8s, "overlays/production"))
	if tag != newTag {
		t.Fatalf("kustomize edit set image did not take: webhook-api's tag is %s", tag)
	}
	if after.name() == before.name() || after.name() != "aegis-migrate-"+newTag {
		t.Fatalf("after the release bump the migrate Job is %s (was %s), want aegis-migrate-%s", after.name(), before.name(), newTag)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
