package chaos

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/aegis-payments/aegis/pkg/outbound"
)

// registerEndpoints creates the flaky and the steady endpoint through
// dlq-admin's API with the operator's token, each at its receiver's URL,
// retrying a 503; each receiver then verifies under the secret its
// creation returned, and no other.
func TestRegisterEndpointsGivesEachReceiverItsSecret(t *testing.T) {
	t.Parallel()
	k, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.close)
	var mu sync.Mutex
	created := map[string]string{} // url → secret
	unavailable := 1
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/outbound/endpoints" || r.Header.Get("Authorization") != "Bearer "+opsToken {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if unavailable > 0 {
			unavailable--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var body map[string]any
		dec := json.NewDecoder(r.Body)
		if err := dec.Decode(&body); err != nil || len(body) != 2 || body["url"] == "" || body["description"] == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		secret, err := outbound.NewSecret()
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		u := body["url"].(string)
		created[u] = secret
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "ep-" + strconv.Itoa(len(created)), "url": u, "secret": secret})
	}))
	t.Cleanup(admin.Close)
	_, port, err := net.SplitHostPort(admin.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	su := &suite{sink: k}
	if su.ports.DLQAdmin, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	if err := su.registerEndpoints(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(created) != 2 {
		t.Fatalf("%d endpoints created, want 2: %v", len(created), created)
	}
	body := []byte(`{"event_id":"refund:stripe:re_1"}`)
	for _, name := range []string{receiverFlaky, receiverSteady} {
		secret := created[k.endpointURL(name)]
		if secret == "" {
			t.Fatalf("no endpoint created at the %s receiver's URL (created: %v)", name, created)
		}
		if got := deliver(t, k, name, secret, "refund:stripe:re_1", body); got != http.StatusOK {
			t.Errorf("%s under its own secret: %d, want 200", name, got)
		}
		other := created[k.endpointURL(receiverFlaky)]
		if name == receiverFlaky {
			other = created[k.endpointURL(receiverSteady)]
		}
		if got := deliver(t, k, name, other, "refund:stripe:re_1", body); got != http.StatusUnauthorized {
			t.Errorf("%s under the other endpoint's secret: %d, want 401", name, got)
		}
	}
	for _, r := range k.snapshot() {
		if r.EndpointID == "" {
			t.Errorf("receiver %s has no endpoint id", r.Name)
		}
	}
}
