package chaos

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// registerEndpoints registers, as an operator would through dlq-admin's
// API (POST /v1/outbound/endpoints), one endpoint per receiver of the sink
// (the flaky one and the steady one), and hands each receiver the secret
// the creation returned. Only then does the workload start: every
// settlement event of the run is one both endpoints want.
func (su *suite) registerEndpoints(ctx context.Context) error {
	for _, name := range []string{receiverFlaky, receiverSteady} {
		id, secret, err := createEndpoint(ctx, stack.URL(su.ports.DLQAdmin), opsToken, su.sink.endpointURL(name),
			"chaos: the "+name+" receiver")
		if err != nil {
			return fmt.Errorf("register the %s endpoint: %w", name, err)
		}
		if err := su.sink.register(name, id, secret); err != nil {
			return err
		}
	}
	return nil
}

// createEndpoint creates an endpoint for url through dlq-admin's API at
// dlqAdmin with an operator's token, and returns its id and secret. A 503
// (Postgres did not answer) is retried a few times, as aegisctl's user
// would.
func createEndpoint(ctx context.Context, dlqAdmin, token, url, description string) (id, secret string, err error) {
	for attempt := 1; ; attempt++ {
		status, res, err := opCall(ctx, http.MethodPost, dlqAdmin+"/v1/outbound/endpoints", token,
			map[string]any{"url": url, "description": description})
		if err != nil {
			return "", "", err
		}
		if status == http.StatusServiceUnavailable && attempt < 10 {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		if status != http.StatusCreated {
			return "", "", fmt.Errorf("POST /v1/outbound/endpoints answered %d: %v", status, res["error"])
		}
		id, secret = endpointOf(res)
		if id == "" || secret == "" {
			return "", "", fmt.Errorf("POST /v1/outbound/endpoints answered 201 without an id and a secret (fields %v)",
				slices.Sorted(maps.Keys(res)))
		}
		return id, secret, nil
	}
}

// endpointOf reads the id and the secret from a creation's answer: the
// endpoint's fields and its secret, at the top level or the endpoint
// nested under "endpoint".
func endpointOf(res map[string]any) (id, secret string) {
	id, _ = res["id"].(string)
	secret, _ = res["secret"].(string)
	if ep, ok := res["endpoint"].(map[string]any); ok && id == "" {
		id, _ = ep["id"].(string)
		if secret == "" {
			secret, _ = ep["secret"].(string)
		}
	}
	return id, secret
}
