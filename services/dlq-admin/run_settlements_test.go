package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deliver"
)

// With SETTLEMENT_WEBHOOK_URL set, dlq-admin delivers aegis.settlements:
// a verifiable event reaches the receiver, and one it refuses is a dead
// letter ops find through the API, with its alert.
func TestRunDeliversSettlementWebhooks(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cluster := kafkatest.NewCluster(t)
	const token = "viewer-token-0123456789"
	const secret = "whsec_run_test_0123456789"
	var mu sync.Mutex
	verified := map[string]error{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get(deliver.HeaderEventID)
		mu.Lock()
		verified[id] = deliver.Verify(secret, r.Header.Get(deliver.HeaderSignature), body, 5*time.Minute, time.Now())
		mu.Unlock()
		if strings.Contains(id, "re_refused") {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()
	logs := &proctest.Logs{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, env(map[string]string{
			"DATABASE_URL":              db.URL,
			"HTTP_ADDR":                 "127.0.0.1:0",
			"KAFKA_BROKERS":             strings.Join(cluster.ListenAddrs(), ","),
			"DLQ_ADMIN_TOKENS":          "ops:viewer:" + token,
			"SHUTDOWN_GRACE":            "5s",
			"SETTLEMENT_WEBHOOK_URL":    rc.URL + "/aegis?token=sekrit",
			"SETTLEMENT_WEBHOOK_SECRET": secret,
		}), logs)
	}()
	require.Eventually(t, func() bool { return logs.ListenAddr() != "" }, 30*time.Second, 10*time.Millisecond, "%s", logs)

	ok := event.NewPayoutOutcome(event.TypePayoutFailed, "0192f0c4-6a2e-7c4b-9b4e-1a2b3c4d5e6f", "FINALIZED", "alice", 700,
		"usd", "stripe", time.Now())
	ok.Error = "account closed"
	refused := event.NewReturnPosted(event.TypeDisputeOpened, "stripe", "dispute_hold", "re_refused", "alice", 300, "usd", time.Now())
	refused.PaymentReference = "pi_1"
	producer := kafkatest.NewClient(t, cluster)
	for _, e := range []any{ok, refused} {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		r := &kgo.Record{Topic: kafkax.TopicSettlements, Key: []byte("alice"), Value: b}
		require.NoError(t, producer.ProduceSync(ctx, r).FirstErr())
	}

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(verified) == 2
	}, 30*time.Second, 20*time.Millisecond)
	mu.Lock()
	require.NoError(t, verified[ok.EventID])
	require.NoError(t, verified[refused.EventID])
	mu.Unlock()

	base := "http://" + logs.ListenAddr()
	require.Eventually(t, func() bool {
		req, err := http.NewRequest(http.MethodGet, base+"/v1/dead-letters?topic=aegis.settlements", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return strings.Contains(string(b), "receiver answered 422") && strings.Contains(string(b), `"consumer_group":"settlement-webhooks"`)
	}, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "ALERT: dead letter on aegis.settlements (permanent)")
	}, 30*time.Second, 20*time.Millisecond)

	cancel()
	require.NoError(t, <-done)
	require.NotContains(t, logs.String(), "sekrit", "the URL's query is not logged")
	require.NotContains(t, logs.String(), secret)
}
