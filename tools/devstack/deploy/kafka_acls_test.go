package deploy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// aclFile is deploy/k8s/overlays/production/kafka-acls.yaml.
type aclFile struct {
	Principals []struct {
		Service string `yaml:"service"`
		User    string `yaml:"user"`
		ACLs    []struct {
			Type       string   `yaml:"type"`
			Name       string   `yaml:"name"`
			Operations []string `yaml:"operations"`
		} `yaml:"acls"`
	} `yaml:"principals"`
}

// wantACLs is what each principal must be allowed, and nothing more:
// "<type> <name> <operation>", from the topics the code names (kafkax) and
// the services' default consumer groups (CONSUMER_GROUP, DLQ_CONSUMER_GROUP,
// OUTBOUND_GROUP).
func wantACLs() map[string][]string {
	pending, transactions, settlements := kafkax.TopicWebhookPending, kafkax.TopicTransactions, kafkax.TopicSettlements
	dlqs := []string{kafkax.DLQTopic(pending), kafkax.DLQTopic(transactions), kafkax.DLQTopic(settlements), kafkax.TopicOutboxDLQ}
	var relay, admin []string
	for _, t := range kafkax.AllTopics() {
		relay = append(relay, "topic "+t+" Write") // the relay publishes whatever the outbox names
	}
	relay = append(relay, "topic "+settlements+" Read", "group outbound-events Read") // outbound delivery's intake
	for _, t := range dlqs {
		admin = append(admin, "topic "+t+" Read")
	}
	admin = append(admin, "group dlq-admin Read",
		"topic "+pending+" Describe", "topic "+transactions+" Describe", "group payout-worker Describe")
	return map[string][]string{
		"outbox-relay": relay,
		"payout-worker": {"topic " + pending + " Read", "topic " + transactions + " Read", "group payout-worker Read",
			"topic " + kafkax.DLQTopic(pending) + " Write", "topic " + kafkax.DLQTopic(transactions) + " Write"},
		"dlq-admin": admin,
		"keda":      {"topic " + pending + " Describe", "topic " + transactions + " Describe", "group payout-worker Describe"},
	}
}

func readYAML(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			if errors.Is(err, io.EOF) {
				return docs
			}
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, d)
	}
}

// The production overlay gives each service its own Kafka principal, with
// ACLs for exactly the topics and groups it uses: only outbox-relay may
// write aegis.webhook.pending, nobody has a wildcard, and each Deployment
// authenticates as its principal with its own password.
func TestKafkaACLs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(root(t), "deploy", "k8s", "overlays", "production")
	raw, err := os.ReadFile(filepath.Join(dir, "kafka-acls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file aclFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("kafka-acls.yaml: %v", err)
	}
	want := wantACLs()
	users := map[string]string{}
	for _, p := range file.Principals {
		if _, dup := users[p.Service]; dup {
			t.Errorf("service %s has two principals", p.Service)
		}
		for s, u := range users {
			if u == p.User {
				t.Errorf("services %s and %s share the Kafka user %s", s, p.Service, u)
			}
		}
		users[p.Service] = p.User
		var got []string
		for _, a := range p.ACLs {
			if strings.ContainsAny(a.Name, "*?") || a.Name == "" {
				t.Errorf("%s: no wildcard or empty resource names (%q)", p.Service, a.Name)
			}
			for _, op := range a.Operations {
				got = append(got, fmt.Sprintf("%s %s %s", a.Type, a.Name, op))
			}
		}
		slices.Sort(got)
		w := slices.Clone(want[p.Service])
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("%s (%s): ACLs\n  %v\nwant exactly\n  %v", p.Service, p.User, got, w)
		}
		if p.Service != "outbox-relay" && slices.Contains(got, "topic "+kafkax.TopicWebhookPending+" Write") {
			t.Errorf("%s may write %s: only the relay publishes money events", p.Service, kafkax.TopicWebhookPending)
		}
	}
	for s := range want {
		if _, ok := users[s]; !ok {
			t.Errorf("no principal for %s", s)
		}
	}

	// Each Deployment that talks to Kafka authenticates as its principal,
	// with a password of its own.
	passwords := map[string]string{}
	for _, d := range readYAML(t, filepath.Join(dir, "kafka-principals.yaml")) {
		name := d["metadata"].(map[string]any)["name"].(string)
		env := map[string]any{}
		for _, c := range d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
			for _, e := range c.(map[string]any)["env"].([]any) {
				e := e.(map[string]any)
				env[e["name"].(string)] = e
			}
		}
		user, _ := env["KAFKA_SASL_USERNAME"].(map[string]any)["value"].(string)
		if users[name] == "" || user != users[name] {
			t.Errorf("Deployment %s authenticates as %q, its principal is %q", name, user, users[name])
		}
		pw, _ := env["KAFKA_SASL_PASSWORD"].(map[string]any)
		key := fmt.Sprint(pw["valueFrom"].(map[string]any)["secretKeyRef"].(map[string]any)["key"])
		for other, k := range passwords {
			if k == key {
				t.Errorf("Deployments %s and %s share the Kafka password key %s", name, other, key)
			}
		}
		passwords[name] = key
	}
	for _, s := range []string{"outbox-relay", "payout-worker", "dlq-admin"} {
		if _, ok := passwords[s]; !ok {
			t.Errorf("Deployment %s has no Kafka principal of its own in kafka-principals.yaml", s)
		}
	}
	kust, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(kust), "KAFKA_SASL_USERNAME=") {
		t.Error("kustomization.yaml sets one KAFKA_SASL_USERNAME for every service")
	}
}
