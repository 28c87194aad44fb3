package observability_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// relabelConfig is one step of a scrape config's relabel_configs.
type relabelConfig struct {
	SourceLabels []string `yaml:"source_labels"`
	Separator    *string  `yaml:"separator"`
	Regex        *string  `yaml:"regex"`
	TargetLabel  string   `yaml:"target_label"`
	Replacement  *string  `yaml:"replacement"`
	Action       string   `yaml:"action"`
}

// relabel applies cfgs to labels as Prometheus does for the actions the
// Kubernetes config uses (replace, keep, drop); ok is false when the
// target is dropped.
func relabel(t *testing.T, labels map[string]string, cfgs []relabelConfig) (map[string]string, bool) {
	t.Helper()
	out := map[string]string{}
	for k, v := range labels {
		out[k] = v
	}
	for _, c := range cfgs {
		sep, expr, repl := ";", "(.*)", "$1"
		if c.Separator != nil {
			sep = *c.Separator
		}
		if c.Regex != nil {
			expr = *c.Regex
		}
		if c.Replacement != nil {
			repl = *c.Replacement
		}
		re, err := regexp.Compile("^(?:" + expr + ")$")
		require.NoError(t, err)
		vals := make([]string, len(c.SourceLabels))
		for i, l := range c.SourceLabels {
			vals[i] = out[l]
		}
		val := strings.Join(vals, sep)
		switch c.Action {
		case "keep":
			if !re.MatchString(val) {
				return nil, false
			}
		case "drop":
			if re.MatchString(val) {
				return nil, false
			}
		case "", "replace":
			m := re.FindStringSubmatchIndex(val)
			if m == nil {
				continue
			}
			res := string(re.ExpandString(nil, repl, val, m))
			if res == "" {
				delete(out, c.TargetLabel)
				continue
			}
			out[c.TargetLabel] = res
		default:
			t.Fatalf("relabel action %q: this test does not know it", c.Action)
		}
	}
	return out, true
}

var labelUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// podTemplate is the part of a workload manifest kubernetes_sd reads.
type podTemplate struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []struct {
					Ports []struct {
						ContainerPort int `yaml:"containerPort"`
					} `yaml:"ports"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// The Kubernetes scrape config turns each pod of deploy/k8s/base's
// Deployments into one target on its annotated metrics port, labelled with
// the service (app.kubernetes.io/name), the pod and the namespace: the
// labels the alert rules group by. A finished pod is no target.
func TestKubernetesScrapeConfigLabelsEveryServicesPods(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "observability", "prometheus-kubernetes.yml"))
	require.NoError(t, err)
	var cfg struct {
		ScrapeConfigs []struct {
			JobName        string          `yaml:"job_name"`
			RelabelConfigs []relabelConfig `yaml:"relabel_configs"`
		} `yaml:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &cfg))
	require.Len(t, cfg.ScrapeConfigs, 1)
	steps := cfg.ScrapeConfigs[0].RelabelConfigs

	manifests, err := filepath.Glob(filepath.Join(root, "deploy", "k8s", "base", "*.yaml"))
	require.NoError(t, err)
	services := map[string]bool{}
	for _, m := range manifests {
		f, err := os.Open(m)
		require.NoError(t, err)
		dec := yaml.NewDecoder(f)
		for {
			var w podTemplate
			err := dec.Decode(&w)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, m)
			if w.Kind != "Deployment" {
				continue
			}
			tmpl := w.Spec.Template
			pod := w.Metadata.Name + "-7d9f8b6c5-x2k4q"
			meta := map[string]string{
				"__meta_kubernetes_namespace": "aegis",
				"__meta_kubernetes_pod_name":  pod,
				"__meta_kubernetes_pod_phase": "Running",
				"__metrics_path__":            "/metrics",
				"__scheme__":                  "http",
			}
			for k, v := range tmpl.Metadata.Labels {
				meta["__meta_kubernetes_pod_label_"+labelUnsafe.ReplaceAllString(k, "_")] = v
			}
			for k, v := range tmpl.Metadata.Annotations {
				meta["__meta_kubernetes_pod_annotation_"+labelUnsafe.ReplaceAllString(k, "_")] = v
			}
			targets := map[string]bool{}
			for _, c := range tmpl.Spec.Containers {
				for _, p := range c.Ports {
					in := map[string]string{"__address__": "10.1.2.3:" + strconv.Itoa(p.ContainerPort)}
					for k, v := range meta {
						in[k] = v
					}
					got, ok := relabel(t, in, steps)
					require.True(t, ok, "%s: pod dropped", w.Metadata.Name)
					require.Equal(t, w.Metadata.Name, got["service"], "service label")
					require.Equal(t, pod, got["pod"])
					require.Equal(t, "aegis", got["namespace"])
					require.Equal(t, tmpl.Metadata.Annotations["prometheus.io/path"], got["__metrics_path__"])
					targets[got["__address__"]] = true
				}
			}
			require.Equal(t, map[string]bool{"10.1.2.3:" + tmpl.Metadata.Annotations["prometheus.io/port"]: true}, targets,
				"%s: every container port is the one annotated target", w.Metadata.Name)
			services[w.Metadata.Name] = true

			meta["__address__"] = "10.1.2.3:9090"
			meta["__meta_kubernetes_pod_phase"] = "Succeeded"
			_, ok := relabel(t, meta, steps)
			require.False(t, ok, "%s: a finished pod is no target", w.Metadata.Name)
		}
		require.NoError(t, f.Close())
	}
	require.Equal(t, map[string]bool{"webhook-api": true, "outbox-relay": true, "payout-worker": true, "dlq-admin": true}, services)

	// A pod that does not ask to be scraped is not.
	_, ok := relabel(t, map[string]string{"__address__": "10.1.2.4:8080", "__meta_kubernetes_pod_label_app_kubernetes_io_name": "other",
		"__meta_kubernetes_pod_phase": "Running"}, steps)
	require.False(t, ok)
}
